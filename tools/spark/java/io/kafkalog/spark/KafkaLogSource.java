package io.kafkalog.spark;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code spark.read.format("kafkalog")} in the JVM: kafkalog's one planner (Python, {@code
 * kafkalog.tools.spark.plan}) plans the read on the driver, and {@link SegmentScan} decodes the planned pieces
 * with column pruning.
 *
 * <p>The plan comes from the driver's Python (the interpreter of the session's {@code spark.kafkalog.python},
 * else {@code spark.pyspark.driver.python}, {@code spark.pyspark.python}, {@code PYSPARK_DRIVER_PYTHON}, {@code
 * PYSPARK_PYTHON}, {@code python3}) running {@code python -m kafkalog.tools.spark.jvm_plan --serve}, kept for the
 * Spark application ({@link Planner#shared}: its imports are paid once, not once per query), asked as JSON: {@code
 * schema} (when the DataFrame is made: the schema of the options, and whether the options alone send the read to
 * the Python data source) and {@code plan} (when a query is planned: the encoded pieces of the files as they are
 * then, or why the scan does not read them, or kafkalog's error with its file and byte).
 *
 * <p>What the scan does not read (the reasons of {@code kafkalog.tools.spark.jvm}: {@code level=batch}, {@code
 * mode=permissive}, {@code pushFilters}, remote paths, segments past 2 GiB), the streams {@link
 * KafkaLogMicroBatchStream} does not read (the same reasons, or a FileSystem the JVM lacks) and writes go to
 * kafkalog's Python data source, registered as {@value #PYTHON_NAME} by {@code
 * kafkalog.tools.spark.register(spark)}; the reason is logged once per JVM and named in the plan's description.
 */
public final class KafkaLogSource implements TableProvider, DataSourceRegister {
    public static final String NAME = "kafkalog";
    /** The name the Python data source is registered under when this source is on the classpath. */
    public static final String PYTHON_NAME = "kafkalog_python";
    static final String PLANNER = "kafkalog.tools.spark.jvm_plan";
    private static final Logger LOG = LoggerFactory.getLogger(KafkaLogSource.class);
    private static final Set<String> LOGGED = ConcurrentHashMap.newKeySet();

    /** The answers to {@code schema} by options (Spark asks for the schema, then for a table with them). */
    private final Map<Map<String, String>, JsonNode> schemas = new ConcurrentHashMap<>();

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return StructType.fromDDL(schemaAnswer(options).get("schema").asText());
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new SourceTable(this, schema, partitioning, properties);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    JsonNode schemaAnswer(CaseInsensitiveStringMap options) {
        Map<String, String> key = new HashMap<>(options.asCaseSensitiveMap());
        return schemas.computeIfAbsent(key, k -> ask("schema", k));
    }

    static void logOnce(String reason) {
        if (LOGGED.add(reason)) {
            LOG.warn("kafkalog: format(\"kafkalog\") reads through kafkalog's Python data source: " + reason);
        }
    }

    // ------------------------------------------------------------------------------------------ the planner
    /** The driver's Python interpreter: the session's {@code spark.kafkalog.python}, else PySpark's choice. */
    static String python() {
        org.apache.spark.sql.classic.SparkSession session = org.apache.spark.sql.classic.SparkSession.active();
        String own = session.conf().get("spark.kafkalog.python", "");
        if (!own.isEmpty()) {
            return own;
        }
        SparkConf conf = session.sparkContext().getConf();
        for (String key : List.of("spark.pyspark.driver.python", "spark.pyspark.python")) {
            if (conf.contains(key) && !conf.get(key).isEmpty()) {
                return conf.get(key);
            }
        }
        for (String env : List.of("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON")) {
            String v = System.getenv(env);
            if (v != null && !v.isEmpty()) {
                return v;
            }
        }
        return "python3";
    }

    /** One request to kafkalog's planner; a planning error fails with kafkalog's own message. */
    static JsonNode ask(String request, Map<String, String> options) {
        Map<String, Object> body = new HashMap<>();
        body.put("request", request);
        body.put("options", options);
        body.put("hadoop", s3aConf());
        return Planner.shared(body);
    }

    /** The session's {@code fs.s3a.*} Hadoop configuration: the planner's {@code s3.*} options a read leaves out. */
    static Map<String, String> s3aConf() {
        Map<String, String> out = new HashMap<>();
        org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf().getPropsWithPrefix("fs.s3a.")
                .forEach((k, v) -> out.put("fs.s3a." + k, v));
        return out;
    }

    static String tail(String s) {
        return s.length() > 2000 ? "..." + s.substring(s.length() - 2000) : s;
    }

    // ------------------------------------------------------------------------------------ the Python source
    /** The Python data source's table (reads it refuses, streams, writes). */
    static Table pythonTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        PythonDataSourceV2 py = new PythonDataSourceV2();
        py.setShortName(PYTHON_NAME);
        return py.getTable(schema, partitioning, properties);
    }

    static void requirePython(String why) {
        boolean registered = org.apache.spark.sql.classic.SparkSession.active().sessionState().dataSourceManager()
                .dataSourceExists(PYTHON_NAME);
        if (!registered) {
            throw new IllegalStateException("kafkalog: " + why + " is read or written by kafkalog's Python data "
                    + "source, which is not registered in this session: call kafkalog.tools.spark.register(spark) "
                    + "(kafkalog.tools.spark.session() does)");
        }
    }

    static final class SourceTable implements Table, SupportsRead, SupportsWrite {
        private final KafkaLogSource source;
        private final StructType schema;
        private final Transform[] partitioning;
        private final Map<String, String> properties;
        private final Table python;

        SourceTable(KafkaLogSource source, StructType schema, Transform[] partitioning, Map<String, String> properties) {
            this.source = source;
            this.schema = schema;
            this.partitioning = partitioning;
            this.properties = properties;
            this.python = pythonTable(schema, partitioning, properties);
        }

        @Override
        public String name() {
            return NAME;
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Transform[] partitioning() {
            return partitioning;
        }

        @Override
        public Map<String, String> properties() {
            return properties;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return python.capabilities();
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            JsonNode answer = source.schemaAnswer(options);
            if (answer.hasNonNull("refusal")) {
                String reason = answer.get("refusal").asText();
                requirePython(reason);
                logOnce(reason);
                return new Delegated((SupportsPushDownFilters) ((SupportsRead) python).newScanBuilder(options), reason);
            }
            return new Deciding(this, options);
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            requirePython("df.write.format(\"kafkalog\")");
            return ((SupportsWrite) python).newWriteBuilder(info);
        }

        ScanBuilder pythonBuilder(CaseInsensitiveStringMap options, String reason) {
            requirePython(reason);
            logOnce(reason);
            return ((SupportsRead) python).newScanBuilder(options);
        }
    }

    /** A read the options alone give to the Python source (its filter pushdown included). */
    static final class Delegated implements ScanBuilder, SupportsPushDownFilters {
        private final SupportsPushDownFilters python;
        private final String reason;

        Delegated(SupportsPushDownFilters python, String reason) {
            this.python = python;
            this.reason = reason;
        }

        @Override
        public Filter[] pushFilters(Filter[] filters) {
            return python.pushFilters(filters);
        }

        @Override
        public Filter[] pushedFilters() {
            return python.pushedFilters();
        }

        @Override
        public Scan build() {
            return new PythonScan(python.build(), reason);
        }
    }

    /** A scan that forwards everything to another: the Python source's, or the one planning chose. */
    abstract static class Forwarding implements Scan {
        abstract Scan target();

        @Override
        public StructType readSchema() {
            return target().readSchema();
        }

        @Override
        public String description() {
            return target().description();
        }

        @Override
        public Batch toBatch() {
            return target().toBatch();
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return target().toMicroBatchStream(checkpointLocation);
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return target().supportedCustomMetrics();
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {
            return target().reportDriverMetrics();
        }

        @Override
        public ColumnarSupportMode columnarSupportMode() {
            return target().columnarSupportMode();
        }
    }

    /** The Python source's scan, described with the reason it reads. */
    static final class PythonScan extends Forwarding {
        private final Scan python;
        private final String description;

        PythonScan(Scan python, String reason) {
            this.python = python;
            this.description = "kafkalog Python data source (" + reason + ") " + python.description();
        }

        @Override
        Scan target() {
            return python;
        }

        @Override
        public String description() {
            return description;
        }
    }

    /**
     * A read the options let the scan take: planned when the query is (the pieces, or why the Python source reads
     * them), with the columns the query uses. A stream is read by {@link KafkaLogMicroBatchStream} (unless the schema
     * answer's {@code refusal} gives it to the Python source) without planning here.
     */
    static final class Deciding implements ScanBuilder, SupportsPushDownRequiredColumns {
        private final SourceTable table;
        private final CaseInsensitiveStringMap options;
        private StructType required;

        Deciding(SourceTable table, CaseInsensitiveStringMap options) {
            this.table = table;
            this.options = options;
            this.required = table.schema;
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            this.required = requiredSchema;
        }

        @Override
        public Scan build() {
            return new DecidingScan(table, options, required);
        }
    }

    static final class DecidingScan extends Forwarding {
        private final SourceTable table;
        private final CaseInsensitiveStringMap options;
        private final StructType required;
        private Scan decided;
        /** Set by {@link #toMicroBatchStream}: a stream, read by the scan or by the Python source. */
        private volatile Scan stream;

        DecidingScan(SourceTable table, CaseInsensitiveStringMap options, StructType required) {
            this.table = table;
            this.options = options;
            this.required = required;
        }

        @Override
        synchronized Scan target() {
            if (stream != null) {
                return stream;
            }
            if (decided == null) {
                JsonNode answer = ask("plan", new HashMap<>(options.asCaseSensitiveMap()));
                List<String> schemes = new java.util.ArrayList<>();
                answer.path("hadoopSchemes").forEach(n -> schemes.add(n.asText()));
                String refusal = answer.hasNonNull("refusal") ? answer.get("refusal").asText()
                        : SegmentBatches.missingFileSystem(String.join(",", schemes));
                if (refusal != null) {
                    decided = new PythonScan(table.pythonBuilder(options, refusal).build(), refusal);
                } else {
                    Map<String, String> scan = new HashMap<>();
                    answer.path("scan").fields().forEachRemaining(e -> scan.put(e.getKey(), e.getValue().asText()));
                    scan.put("pieces", answer.get("pieces").asText());
                    scan.put("verifyCrc", answer.get("verifyCrc").asText());
                    scan.put("includeControlRecords", answer.get("includeControlRecords").asText());
                    SegmentScan.Builder b = new SegmentScan.Builder(table.schema, new CaseInsensitiveStringMap(scan));
                    b.pruneColumns(required);
                    decided = b;
                }
            }
            return decided;
        }

        @Override
        public synchronized MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            JsonNode answer = table.source.schemaAnswer(options);
            List<String> schemes = new java.util.ArrayList<>();
            answer.path("streamSchemes").forEach(n -> schemes.add(n.asText()));
            String refusal = answer.hasNonNull("refusal") ? answer.get("refusal").asText()
                    : SegmentBatches.missingFileSystem(String.join(",", schemes));
            if (refusal == null) {  // the micro-batches are read by the scan
                SegmentScan.Builder scan = new SegmentScan.Builder(table.schema, CaseInsensitiveStringMap.empty());
                scan.pruneColumns(required);
                stream = new StreamScan(scan);
                return new KafkaLogMicroBatchStream(required, options, checkpointLocation);
            }
            stream = new PythonScan(table.pythonBuilder(options, refusal).build(), refusal);
            return stream.toMicroBatchStream(checkpointLocation);
        }
    }

    /** A stream read by {@link KafkaLogMicroBatchStream}: its schema and description. */
    static final class StreamScan extends Forwarding {
        private final Scan scan;

        StreamScan(Scan scan) {
            this.scan = scan;
        }

        @Override
        Scan target() {
            return scan;
        }

        @Override
        public String description() {
            return "kafkalog stream, " + scan.description();
        }
    }
}
