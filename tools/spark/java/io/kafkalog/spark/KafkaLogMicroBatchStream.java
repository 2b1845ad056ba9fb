package io.kafkalog.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code spark.readStream.format("kafkalog")} in the JVM: the micro-batches of kafkalog's stream, decoded by {@link
 * SegmentScan}. Every rule (the offsets, {@code startingOffsets}, {@code maxOffsetsPerTrigger}, complete batches
 * only, {@code failOnDataLoss}, the pieces of a micro-batch) is the Python stream's, asked on the driver of the
 * query's {@link Planner} (one process per query, request {@code
 * stream}: {@code kafkalog.tools.spark.jvm_stream}): one question when the query starts ({@code open}) and one per
 * trigger ({@code latest}: the end offsets and the plan of the micro-batch up to them); a micro-batch Spark runs
 * again from its offset log is planned by one more ({@code plan}).
 *
 * <p>Offsets are Spark's Kafka source's, JSON {@code {"topic":{"partition":nextOffset}}}. As Spark's Kafka source,
 * a new query writes its initial offsets into its checkpoint ({@value #INITIAL} in the source's checkpoint dir),
 * and a restarted query that never committed a micro-batch starts from them, not from what {@code
 * startingOffsets} means by then.
 */
final class KafkaLogMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    static final String INITIAL = "kafkalog-initial-offsets.json";
    private static final Logger LOG = LoggerFactory.getLogger(KafkaLogMicroBatchStream.class);
    private static final ObjectMapper JSON = new ObjectMapper();

    private final StructType schema;
    private final Map<String, String> options;
    private final String checkpoint;
    private final JsonNode opened;
    /** The offsets an availableNow query reads up to (null: not availableNow). */
    private JsonNode target;
    /** What was complete at the last trigger ({@link #reportLatestOffset}). */
    private JsonNode available;
    /** The last trigger's micro-batch: its offsets and plan. */
    private String plannedStart;
    private String plannedEnd;
    private JsonNode plan;
    /** The query's planner. */
    private final Planner planner;
    /** The session's {@code fs.s3a.*} configuration, sent with each question (the planner lists through it). */
    private final Map<String, String> hadoop;

    KafkaLogMicroBatchStream(StructType schema, CaseInsensitiveStringMap options, String checkpoint) {
        this.planner = new Planner(KafkaLogSource.python(), "stream");
        this.schema = schema;
        this.options = new HashMap<>(options.asCaseSensitiveMap());
        this.checkpoint = checkpoint;
        this.hadoop = KafkaLogSource.s3aConf();
        this.opened = ask("open", Map.of());
        this.available = opened.get("available");
    }

    /**
     * One stream question to the query's planner ({@link Planner}: started at the first question, again if it
     * exited, and stopped with the query); the warnings it logged go to this JVM's log, its error (kafkalog's
     * message) fails the call.
     */
    private JsonNode ask(String op, Map<String, Object> body) {
        Map<String, Object> request = new HashMap<>(body);
        request.put("request", "stream");
        request.put("op", op);
        request.put("options", options);
        request.put("hadoop", hadoop);
        return planner.ask(request);
    }

    /** Offsets as the planner writes them ({@code {"topic":{"partition":offset}}}, topics and partitions in order). */
    static final class JsonOffset extends Offset {
        private final String json;

        JsonOffset(JsonNode node) {
            try {
                this.json = JSON.writeValueAsString(node);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public String json() {
            return json;
        }
    }

    private static JsonNode node(Offset offset) {
        try {
            return JSON.readTree(offset.json());
        } catch (IOException e) {
            throw new IllegalArgumentException("kafkalog: bad offsets " + offset.json(), e);
        }
    }

    // ------------------------------------------------------------------------------------------ offsets
    @Override
    public Offset initialOffset() {
        try {
            Path path = new Path(checkpoint, INITIAL);
            Configuration conf = org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf();
            FileSystem fs = path.getFileSystem(conf);
            if (fs.exists(path)) {
                try (InputStream in = fs.open(path)) {
                    return new JsonOffset(JSON.readTree(in));
                }
            }
            JsonNode initial = opened.get("initial");
            Path tmp = new Path(checkpoint, "." + INITIAL + ".tmp");
            fs.mkdirs(path.getParent());
            try (OutputStream out = fs.create(tmp, true)) {
                out.write(JSON.writeValueAsBytes(initial));
            }
            if (!fs.rename(tmp, path)) {
                throw new IOException("cannot rename " + tmp + " to " + path);
            }
            return new JsonOffset(initial);
        } catch (IOException e) {
            throw new IllegalStateException("kafkalog: the stream's initial offsets in " + checkpoint + ": "
                    + e.getMessage(), e);
        }
    }

    @Override
    public Offset deserializeOffset(String json) {
        try {
            return new JsonOffset(JSON.readTree(json));
        } catch (IOException e) {
            throw new IllegalArgumentException("kafkalog: bad offsets in the checkpoint: " + json, e);
        }
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        JsonNode max = opened.get("maxOffsets");
        return max == null || max.isNull() ? ReadLimit.allAvailable() : ReadLimit.maxRows(max.asLong());
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        target = opened.get("available");
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) should be called instead");
    }

    @Override
    public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
        Map<String, Object> body = new HashMap<>();
        body.put("start", node(start));
        body.put("maxRows", limit instanceof ReadMaxRows ? ((ReadMaxRows) limit).maxRows() : null);
        body.put("target", target);
        JsonNode answer = ask("latest", body);
        JsonOffset end = new JsonOffset(answer.get("end"));
        available = answer.get("available");
        plannedStart = start.json();
        plannedEnd = end.json();
        plan = answer.get("plan");
        return end;
    }

    @Override
    public synchronized Offset reportLatestOffset() {
        return available == null ? null : new JsonOffset(available);
    }

    // ------------------------------------------------------------------------------------------ micro-batches
    @Override
    public synchronized InputPartition[] planInputPartitions(Offset start, Offset end) {
        JsonNode p = plan;
        String from = new JsonOffset(node(start)).json();
        String to = new JsonOffset(node(end)).json();
        if (p == null || !from.equals(plannedStart) || !to.equals(plannedEnd)) {
            Map<String, Object> body = new HashMap<>();
            body.put("start", node(start));
            body.put("end", node(end));
            p = ask("plan", body).get("plan");
        }
        if (p.hasNonNull("error")) {
            throw new IllegalStateException(p.get("error").asText());
        }
        return scan(p.get("pieces").asText()).planInputPartitions();
    }

    private SegmentScan.Builder scan(String pieces) {
        Map<String, String> o = new HashMap<>();
        opened.path("scan").fields().forEachRemaining(e -> o.put(e.getKey(), e.getValue().asText()));
        o.put("pieces", pieces);
        o.put("verifyCrc", opened.get("verifyCrc").asText());
        o.put("includeControlRecords", opened.get("includeControlRecords").asText());
        SegmentScan.Builder b = new SegmentScan.Builder(schema, new CaseInsensitiveStringMap(o));
        b.pruneColumns(schema);
        return b;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(scan("").createReaderFactory(), opened.get("failOnDataLoss").asBoolean(),
                opened.get("dataLossFail").asText(), opened.get("dataLossWarn").asText());
    }

    @Override
    public void commit(Offset end) {
        // the files are the broker's: nothing changes on disk
    }

    @Override
    public void stop() {
        planner.close();
    }

    @Override
    public String toString() {
        return "kafkalog stream (JVM segment scan)";
    }

    /**
     * The scan's readers, reading a micro-batch's pieces one after the other; a piece whose segment is gone when it
     * is read (retention deleted it after the driver planned the micro-batch) is data loss, as Spark's Kafka source
     * treats records retention removed between planning and fetching: the query fails naming the segment and the
     * offsets (an {@code IllegalStateException}, Spark's Kafka source's), or with {@code failOnDataLoss} false the
     * executor logs them and reads the rest.
     */
    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory scan;
        private final boolean failOnDataLoss;
        private final String fail;
        private final String warn;

        Factory(PartitionReaderFactory scan, boolean failOnDataLoss, String fail, String warn) {
            this.scan = scan;
            this.failOnDataLoss = failOnDataLoss;
            this.fail = fail;
            this.warn = warn;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            return scan.createReader(partition);
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            List<String> specs = new ArrayList<>();
            for (String spec : ((SegmentScan.Pieces) partition).spec.split("\t", -1)) {
                if (!spec.isEmpty()) {
                    specs.add(spec);
                }
            }
            return new PieceByPiece(specs);
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        /** Whether {@code e} says a file is not there (a local file's open, or Hadoop's open or read of one). */
        static boolean gone(Throwable e) {
            for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
                if (t instanceof FileNotFoundException || t instanceof NoSuchFileException) {
                    return true;
                }
            }
            return false;
        }

        /**
         * What a piece whose segment is gone loses: the segment's records in the micro-batch's offsets of its
         * partition (from the segment's base offset, or the micro-batch's start when it is later).
         */
        static String lost(SegmentScan.Piece piece) {
            long from = Math.max(piece.loOffset, piece.baseOffset());
            String to = piece.hiOffset == Long.MAX_VALUE ? "the end" : String.valueOf(piece.hiOffset);
            return piece.segment + " (offsets " + from + " to " + to + " of " + piece.topic + "-" + piece.partition
                    + ") was deleted before it was read";
        }

        /** The pieces of one input partition, each by a reader of its own, so a gone segment loses only its own. */
        final class PieceByPiece implements PartitionReader<ColumnarBatch> {
            private final List<String> specs;
            private int next;
            private PartitionReader<ColumnarBatch> current;

            PieceByPiece(List<String> specs) {
                this.specs = specs;
            }

            @Override
            public boolean next() throws IOException {
                while (true) {
                    if (current == null) {
                        if (next >= specs.size()) {
                            return false;
                        }
                        current = scan.createColumnarReader(new SegmentScan.Pieces(specs.get(next++)));
                    }
                    try {
                        if (current.next()) {
                            return true;
                        }
                    } catch (IOException | RuntimeException e) {
                        if (!gone(e)) {
                            throw e;
                        }
                        String what = lost(new SegmentScan.Piece(specs.get(next - 1)));
                        if (failOnDataLoss) {
                            throw new IllegalStateException("DataLossError: " + what + ". " + fail, e);
                        }
                        LOG.warn("kafkalog: " + what + ". " + warn);
                    }
                    current.close();
                    current = null;
                }
            }

            @Override
            public ColumnarBatch get() {
                return current.get();
            }

            @Override
            public void close() throws IOException {
                if (current != null) {
                    current.close();
                    current = null;
                }
            }
        }
    }
}
