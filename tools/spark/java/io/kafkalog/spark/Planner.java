package io.kafkalog.spark;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A kafkalog planner process on the driver: {@code python -m kafkalog.tools.spark.jvm_plan --serve} with the
 * driver's Python, one request per line on its stdin and one answer per line on its stdout, so its imports are paid
 * once, not once per request. It is started at the first request, again (once per request) if it exited, and stopped
 * by {@link #close}; a planner whose JVM exits, however it exits, reads the end of its stdin and exits too. Each
 * request plans the files as they are then (the planner keeps no listing between requests).
 *
 * <p>A stream keeps one for its query ({@link KafkaLogMicroBatchStream}). Batch reads ({@link #shared}) take a kept
 * planner of the driver's Python: one while queries are planned one at a time (another only while one is busy),
 * stopped when the Spark application ends ({@code SparkContext.stop()}, {@code spark.stop()}) or the JVM exits.
 */
final class Planner implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Planner.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The idle kept planners of batch reads, by driver Python (guarded by itself). */
    private static final Map<String, Deque<Planner>> IDLE = new HashMap<>();
    /** Every kept planner, idle or busy: what the application's end stops. */
    private static final Set<Planner> KEPT = ConcurrentHashMap.newKeySet();
    /** The SparkContext whose end stops the kept planners (guarded by {@link #IDLE}). */
    private static SparkContext watched;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(Planner::stopKept, "kafkalog-planner-stop"));
    }

    private final String python;
    private final String user;
    private Process process;
    private BufferedWriter toPlanner;
    private BufferedReader fromPlanner;
    private File stderr;

    /** A planner run with {@code python}, for {@code user} (named in its errors: "source", "stream"). */
    Planner(String python, String user) {
        this.python = python;
        this.user = user;
    }

    /** One batch request, answered by a kept planner of the session's driver Python (see the class's doc). */
    static JsonNode shared(Map<String, Object> request) {
        String python = KafkaLogSource.python();
        Planner planner;
        synchronized (IDLE) {
            SparkContext sc = org.apache.spark.sql.classic.SparkSession.active().sparkContext();
            if (sc != watched) {
                watched = sc;
                sc.addSparkListener(new SparkListener() {
                    @Override
                    public void onApplicationEnd(SparkListenerApplicationEnd end) {
                        stopKept();
                    }
                });
            }
            planner = IDLE.computeIfAbsent(python, k -> new ArrayDeque<>()).pollFirst();
            if (planner == null) {
                planner = new Planner(python, "source");
                KEPT.add(planner);
            }
        }
        try {
            return planner.ask(request);
        } finally {
            synchronized (IDLE) {
                if (KEPT.contains(planner)) {  // (not stopped meanwhile by the application's end)
                    IDLE.computeIfAbsent(python, k -> new ArrayDeque<>()).addFirst(planner);
                }
            }
        }
    }

    /** Stops every kept planner (the application ended, or the JVM exits). */
    static void stopKept() {
        List<Planner> all;
        synchronized (IDLE) {
            all = new ArrayList<>(KEPT);
            KEPT.clear();
            IDLE.clear();
        }
        all.forEach(Planner::close);
    }

    /**
     * One request and its answer: the warnings the planner logged go to this JVM's log, its error (kafkalog's
     * message, with file and byte) fails the call.
     */
    synchronized JsonNode ask(Map<String, Object> request) {
        String line;
        try {
            line = JSON.writeValueAsString(request);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        String got = null;
        for (int attempt = 0; got == null && attempt < 2; attempt++) {
            try {
                if (process == null || !process.isAlive()) {
                    start();
                }
                toPlanner.write(line);
                toPlanner.write('\n');
                toPlanner.flush();
                got = fromPlanner.readLine();
            } catch (IOException e) {
                got = null;  // it exited (or could not start): started again once
            }
            if (got == null) {
                String why = error();
                close();
                if (attempt == 1) {
                    throw new IllegalStateException("kafkalog: " + python + " -m " + KafkaLogSource.PLANNER
                            + " --serve exited: " + why + " (the JVM kafkalog " + user + " plans with the driver's "
                            + "Python, which must have kafkalog installed)");
                }
            }
        }
        JsonNode answer;
        try {
            answer = JSON.readTree(got);
        } catch (IOException e) {
            throw new IllegalStateException("kafkalog: the planner's answer is not JSON: " + got, e);
        }
        answer.path("warnings").forEach(w -> LOG.warn("kafkalog: " + w.asText()));
        if (answer.hasNonNull("error")) {
            throw new IllegalArgumentException(answer.get("error").asText());
        }
        return answer;
    }

    private void start() throws IOException {
        stderr = File.createTempFile("kafkalog-plan-", ".err");
        process = new ProcessBuilder(python, "-m", KafkaLogSource.PLANNER, "--serve").redirectError(stderr).start();
        toPlanner = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
        fromPlanner = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    }

    private String error() {
        try {
            return KafkaLogSource.tail(stderr == null ? "" : Files.readString(stderr.toPath()).strip());
        } catch (IOException e) {
            return e.getMessage();
        }
    }

    /** Stops the process: its stdin closed, it exits (its own cleanup run); destroyed if it has not within 2 s. */
    @Override
    public synchronized void close() {
        if (process != null) {
            try {
                toPlanner.close();
            } catch (IOException e) {
                // it exited
            }
            try {
                if (!process.waitFor(2, TimeUnit.SECONDS)) {
                    process.destroy();
                }
            } catch (InterruptedException e) {
                process.destroy();
                Thread.currentThread().interrupt();
            }
            process = null;
        }
        if (stderr != null) {
            stderr.delete();
            stderr = null;
        }
    }
}
