package io.kafkalog.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.CloseableIterator;
import org.apache.spark.QueryContext;
import org.apache.spark.SparkRuntimeException;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * kafkalog's JVM scan: decodes the pieces of segments that kafkalog planned (in Python, {@code
 * kafkalog.tools.spark.plan}) into Spark column vectors, reading only the columns the query asks for (column
 * pruning, which Spark's Python data source API does not offer). Batches are decoded by Kafka's own record classes
 * (kafka-clients' {@code FileRecords}), so every value is the broker's reading of the bytes.
 *
 * <p>Option {@code pieces}: one line per input partition, pieces separated by tab characters, each piece
 * {@code path|topic|partition|segment|start|end|loOffset|hiOffset|loTimestamp|hiTimestamp|size|mtime|inode} (the
 * record filter of the partition's resolved offset window, Long.MIN_VALUE..Long.MAX_VALUE for none; the segment's
 * file as planned, -1 where not known: {@code kafkalog.storage.io.file_stamp.FileStamp}). Option {@code schema}: the record
 * schema as Spark's DDL (kafkalog's {@code RECORD_COLUMNS}). Option {@code verifyCrc}, {@code
 * includeControlRecords}: as the Python source's. Options {@code failOnDataLoss}, {@code replaced}, {@code
 * replacedFail}, {@code replacedWarn}: a piece whose segment is not the file planned (replaced after planning:
 * compaction's swap, recovery's truncation) fails the read with the planner's words, or is skipped and logged.
 */
public final class SegmentScan implements TableProvider {
    private static final Logger LOG = LoggerFactory.getLogger(SegmentScan.class);
    static final int ROWS = 4096;
    /** Epoch ms beyond which a timestamp has no Spark TIMESTAMP (microseconds in a long): null, as in kafkalog. */
    static final long MAX_MS = Long.MAX_VALUE / 1000 - 1;

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return StructType.fromDDL(options.get("schema"));
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new ScanTable(schema);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    static final class ScanTable implements Table, SupportsRead {
        private final StructType schema;

        ScanTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return "kafkalog-scan";
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Set.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return new Builder(schema, options);
        }
    }

    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns, Scan, Batch {
        private StructType required;
        private final CaseInsensitiveStringMap options;

        Builder(StructType schema, CaseInsensitiveStringMap options) {
            this.required = schema;
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            this.required = requiredSchema;
        }

        @Override
        public Scan build() {
            return this;
        }

        @Override
        public StructType readSchema() {
            return required;
        }

        @Override
        public String description() {
            return "kafkalog segment scan " + String.join(",", required.fieldNames());
        }

        @Override
        public Batch toBatch() {
            return this;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            List<InputPartition> out = new ArrayList<>();
            String all = options.getOrDefault("pieces", "");
            for (String line : all.split("\n", -1)) {
                if (!line.isEmpty()) {
                    out.add(new Pieces(line));
                }
            }
            if (out.isEmpty()) {
                out.add(new Pieces(""));
            }
            return out.toArray(new InputPartition[0]);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new Factory(required, options.getBoolean("verifyCrc", true),
                    options.getBoolean("includeControlRecords", false), hadoopConf(options),
                    options.getInt("firstWindow", SegmentBatches.FIRST_WINDOW),
                    options.getInt("maxWindow", SegmentBatches.MAX_WINDOW), new DataLoss(options));
        }
    }

    /**
     * The Hadoop configuration the executors read segments under a URL with (null when every piece is local): the
     * session's ({@code spark.hadoop.*}, {@code core-site.xml}) with the planner's options on top (option {@code
     * hadoop.KEY}: {@code kafkalog.storage.io.fs.hadoop_conf}, so the scan reaches the server the planner read).
     * Option {@code hadoopFiles} true gives one whatever the pieces (a stream's readers, made before its pieces).
     */
    static SerializableConfiguration hadoopConf(CaseInsensitiveStringMap options) {
        boolean remote = options.getBoolean("hadoopFiles", false);
        for (String line : options.getOrDefault("pieces", "").split("[\\n\\t]")) {
            if (!line.isEmpty() && SegmentBatches.isHadoop(line.substring(0, Math.max(line.indexOf('|'), 0)))) {
                remote = true;
                break;
            }
        }
        if (!remote) {
            return null;
        }
        Configuration conf = org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf();
        for (Map.Entry<String, String> e : options.asCaseSensitiveMap().entrySet()) {
            if (e.getKey().startsWith("hadoop.")) {
                conf.set(e.getKey().substring("hadoop.".length()), e.getValue());
            }
        }
        return new SerializableConfiguration(conf);
    }

    static final class Pieces implements InputPartition {
        private static final long serialVersionUID = 1L;
        final String spec;

        Pieces(String spec) {
            this.spec = spec;
        }
    }

    /**
     * What the reader does with a piece whose segment is not the file planned: the planner's words ({@code
     * kafkalog.tools.spark.scan.REPLACED}, its fields filled here), then a failure ({@code failOnDataLoss} true) or
     * a warning and the next piece.
     */
    static final class DataLoss implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final boolean fail;
        final String replaced;
        final String failText;
        final String warnText;

        DataLoss(CaseInsensitiveStringMap options) {
            fail = options.getBoolean("failOnDataLoss", true);
            replaced = options.getOrDefault("replaced", "{segment} was replaced after the read was planned");
            failText = options.getOrDefault("replacedFail", "");
            warnText = options.getOrDefault("replacedWarn", "");
        }

        /** Fails the read, or logs and returns (the caller skips the piece). */
        void replaced(Piece p, SegmentBatches found) {
            String first = String.valueOf(Math.max(p.loOffset, p.baseOffset()));
            String last = p.hiOffset == Long.MAX_VALUE ? "the end" : String.valueOf(p.hiOffset);
            String what = replaced.replace("{segment}", p.segment).replace("{first}", first)
                    .replace("{last}", last).replace("{topic}", p.topic)
                    .replace("{partition}", String.valueOf(p.partition)).replace("{start}", String.valueOf(p.start))
                    .replace("{end}", String.valueOf(p.end)).replace("{size}", String.valueOf(p.size))
                    .replace("{mtime}", String.valueOf(p.mtime)).replace("{found_size}", String.valueOf(found.size))
                    .replace("{found_mtime}", String.valueOf(found.mtime));
            if (fail) {
                throw new IllegalStateException("DataLossError: " + what + " " + failText);
            }
            LOG.warn("kafkalog: " + what + " " + warnText);
        }
    }

    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        final StructType schema;
        final boolean verifyCrc;
        final boolean includeControl;
        /** The Hadoop configuration of pieces under a URL (null: every piece is local). */
        final SerializableConfiguration hadoop;
        final int firstWindow;
        final int maxWindow;
        final DataLoss dataLoss;

        Factory(StructType schema, boolean verifyCrc, boolean includeControl, SerializableConfiguration hadoop,
                int firstWindow, int maxWindow, DataLoss dataLoss) {
            this.schema = schema;
            this.verifyCrc = verifyCrc;
            this.includeControl = includeControl;
            this.hadoop = hadoop;
            this.firstWindow = firstWindow;
            this.maxWindow = maxWindow;
            this.dataLoss = dataLoss;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("kafkalog's segment scan reads columnar batches only");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new Reader(schema, ((Pieces) partition).spec, verifyCrc, includeControl,
                    hadoop == null ? null : hadoop.value(), firstWindow, maxWindow, dataLoss);
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }
    }

    /** One planned piece: bytes [start, end) of a segment and the record filter of its partition's window. */
    static final class Piece {
        final String path;
        final String topic;
        final int partition;
        final String segment;
        final int start;
        final int end;
        final long loOffset;
        final long hiOffset;
        final long loTimestamp;
        final long hiTimestamp;
        /** Whether any bound is set (Long.MIN_VALUE..Long.MAX_VALUE everywhere: no record filter). */
        final boolean filtering;
        /** The segment's file as planned: size, modification time (ms), inode (-1: not known; size -1: no check). */
        final long size;
        final long mtime;
        final long inode;

        Piece(String spec) {
            String[] f = spec.split("\\|", -1);
            if (f.length != 13) {
                throw new IllegalArgumentException("kafkalog segment scan: a piece needs 13 fields: " + spec);
            }
            path = unescape(f[0]);
            topic = unescape(f[1]);
            partition = Integer.parseInt(f[2]);
            segment = unescape(f[3]);
            start = Integer.parseInt(f[4]);
            end = Integer.parseInt(f[5]);
            loOffset = Long.parseLong(f[6]);
            hiOffset = Long.parseLong(f[7]);
            loTimestamp = Long.parseLong(f[8]);
            hiTimestamp = Long.parseLong(f[9]);
            filtering = loOffset != Long.MIN_VALUE || hiOffset != Long.MAX_VALUE || loTimestamp != Long.MIN_VALUE
                    || hiTimestamp != Long.MAX_VALUE;
            size = Long.parseLong(f[10]);
            mtime = Long.parseLong(f[11]);
            inode = Long.parseLong(f[12]);
        }

        /**
         * Whether {@code found} (the segment opened) is the file planned: {@code FileStamp.holds}, compared over the
         * fields the plan gives (the same size and modification time, or the same inode grown by appends).
         */
        boolean holds(SegmentBatches found) {
            return size < 0 || (found.size == size && found.mtime == mtime)
                    || (inode >= 0 && found.inode == inode && found.size > size);
        }

        /** The segment's base offset, from its file name (the piece's first offset when its name has none). */
        long baseOffset() {
            String name = segment.substring(segment.lastIndexOf('/') + 1);
            String digits = name.substring(0, Math.max(name.indexOf('.'), 0));
            try {
                return digits.matches("[0-9]{1,20}") ? Long.parseLong(digits) : loOffset;  // (20 digits: Kafka's)
            } catch (NumberFormatException e) {
                return loOffset;
            }
        }

        /** Paths and names are percent-escaped for the separators (see kafkalog.tools.spark.jvm._escape). */
        static String unescape(String s) {
            if (s.indexOf('%') < 0) {
                return s;
            }
            return java.net.URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
        }
    }

    /**
     * A read error in the Python source's words ({@code CorruptRecordError: SEGMENT: byte N: REASON}). It is a Spark
     * error with a condition (FAILED_READ_FILE.NO_HINT, naming the segment), so Spark fails the query with it instead
     * of wrapping it in "Job aborted", and PySpark raises it as a SparkRuntimeException with this message.
     */
    static final class ReadError extends SparkRuntimeException {
        private static final long serialVersionUID = 1L;
        private final String text;

        ReadError(String segment, long position, String reason, Throwable cause) {
            super("FAILED_READ_FILE.NO_HINT", scala.collection.immutable.Map$.MODULE$.<String, String>empty()
                    .updated("path", segment), cause, new QueryContext[0], "");
            this.text = "CorruptRecordError: " + segment + ": byte " + position + ": " + reason;
        }

        @Override
        public String getMessage() {
            return text;
        }
    }

    /** The columns of the record schema, by name: what the reader writes into each required column. */
    enum Col {
        KEY, VALUE, TOPIC, PARTITION, OFFSET, TIMESTAMP, TIMESTAMP_TYPE, HEADERS, TIMESTAMP_MS, LEADER_EPOCH,
        PRODUCER_ID, PRODUCER_EPOCH, SEQUENCE, IS_TRANSACTIONAL, IS_CONTROL, MAGIC, CODEC, SEGMENT, POSITION;

        static final Map<String, Col> BY_NAME = new HashMap<>();

        static {
            String[] names = {"key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
                "timestampMs", "leaderEpoch", "producerId", "producerEpoch", "sequence", "isTransactional",
                "isControl", "magic", "codec", "segment", "position"};
            for (int i = 0; i < names.length; i++) {
                BY_NAME.put(names[i], values()[i]);
            }
        }
    }

    static final class Reader implements PartitionReader<ColumnarBatch> {
        private final Col[] cols;
        /** The batch's columns: {@link #vectors} for numbers and headers, {@link #bytes} and {@link #names} else. */
        private final OnHeapColumnVector[] vectors;
        private final ScanVectors.Bytes[] bytes;
        private final ScanVectors.Names[] names;
        private final ColumnarBatch batch;
        private final List<Piece> pieces = new ArrayList<>();
        private final boolean verifyCrc;
        private final boolean includeControl;
        private final Configuration hadoop;
        private final int firstWindow;
        private final int maxWindow;
        private final DataLoss dataLoss;
        private int pieceIndex = 0;
        private Piece piece;
        /** The batches of the piece being read (null between pieces). */
        private SegmentBatches file;
        /** Whether {@link #file} may have more batches. */
        private boolean batches;
        /** The records of the batch being read (Kafka's streaming iterator: a compressed batch is inflated as read). */
        private CloseableIterator<Record> records;
        /** The inflation buffers of compressed batches, reused from batch to batch (Kafka's consumer does so). */
        private final BufferSupplier buffers = BufferSupplier.create();
        /** The batch's fields, read once per batch instead of once per row. */
        private int timestampType;
        private int leaderEpoch;
        private long producerId;
        private int producerEpoch;
        private boolean transactional;
        private boolean control;
        private int magic;
        private final ScanVectors.Strings strings = new ScanVectors.Strings();
        /** The numbers of the piece's topic and segment and of the batch's codec in {@link #strings}. */
        private int topicId;
        private int segmentId;
        private int codecId;
        private int headerCount;
        /** Where the next batch of the piece starts: its end when every byte was a batch. */
        private long nextPosition;
        private long batchPosition;
        /** The records of a run of rows ({@link #next}): one batch's, up to a column batch's rows. */
        private final Record[] run = new Record[ROWS];

        Reader(StructType schema, String spec, boolean verifyCrc, boolean includeControl, Configuration hadoop,
                int firstWindow, int maxWindow, DataLoss dataLoss) {
            this.hadoop = hadoop;
            this.dataLoss = dataLoss;
            this.firstWindow = firstWindow;
            this.maxWindow = maxWindow;
            StructField[] fields = schema.fields();
            cols = new Col[fields.length];
            vectors = new OnHeapColumnVector[fields.length];
            bytes = new ScanVectors.Bytes[fields.length];
            names = new ScanVectors.Names[fields.length];
            ColumnVector[] all = new ColumnVector[fields.length];
            for (int i = 0; i < fields.length; i++) {
                Col c = Col.BY_NAME.get(fields[i].name());
                if (c == null) {
                    throw new IllegalArgumentException("kafkalog segment scan: unknown column " + fields[i].name());
                }
                cols[i] = c;
                DataType t = fields[i].dataType();
                if (c == Col.KEY || c == Col.VALUE) {
                    all[i] = bytes[i] = new ScanVectors.Bytes(t, ROWS);
                } else if (c == Col.TOPIC || c == Col.SEGMENT || c == Col.CODEC) {
                    all[i] = names[i] = new ScanVectors.Names(t, ROWS, strings);
                } else {
                    all[i] = vectors[i] = new OnHeapColumnVector(ROWS, t);
                }
            }
            batch = new ColumnarBatch(all);
            for (String p : spec.split("\t", -1)) {
                if (!p.isEmpty()) {
                    pieces.add(new Piece(p));
                }
            }
            this.verifyCrc = verifyCrc;
            this.includeControl = includeControl;
        }

        /** An error naming the segment and the byte position, in the Python source's words. */
        private ReadError where(long position, String what, Throwable cause) {
            return new ReadError(piece.segment, position, what, cause);
        }

        /** Kafka's message without the file it appends ("... in file PATH."): the error names it already. */
        private String reason(RuntimeException e) {
            String m = String.valueOf(e.getMessage());
            String suffix = " in file " + piece.path + ".";
            return m.endsWith(suffix) ? m.substring(0, m.length() - suffix.length()) : m;
        }

        /** The next record to emit of the batch being read, or null after its last (the next batch is not read). */
        private Record nextInBatch() {
            if (records == null) {
                return null;
            }
            try {
                while (records.hasNext()) {
                    Record r = records.next();
                    if (piece.filtering) {
                        long o = r.offset();
                        long t = r.timestamp();
                        if (o < piece.loOffset || o >= piece.hiOffset || t < piece.loTimestamp
                                || t >= piece.hiTimestamp) {
                            continue;
                        }
                    }
                    return r;
                }
            } catch (RuntimeException e) {
                throw where(batchPosition, "the records of the batch cannot be decoded: " + reason(e), e);
            }
            return null;
        }

        /** The next record to emit, or null at the end of every piece. */
        private Record nextRecord() throws IOException {
            while (true) {
                if (records != null) {
                    Record r = nextInBatch();
                    if (r != null) {
                        return r;
                    }
                    records.close();
                    records = null;
                }
                RecordBatch b = null;
                if (batches) {
                    try {
                        b = file.next();
                    } catch (RuntimeException e) {
                        throw where(nextPosition, reason(e), e);
                    }
                }
                if (b != null) {
                    batchPosition = file.position;
                    nextPosition = batchPosition + b.sizeInBytes();
                    if (verifyCrc && !b.isValid()) {
                        throw where(batchPosition, "record batch is corrupt (stored crc = 0x"
                                + Long.toHexString(b.checksum()) + ", its records do not match it)", null);
                    }
                    byte magic = b.magic();
                    if (!includeControl && magic >= 2 && b.isControlBatch()) {
                        continue;
                    }
                    if (piece.filtering) {
                        if (b.lastOffset() < piece.loOffset) {
                            continue;
                        }
                        if (magic >= 2) {
                            if (b.baseOffset() >= piece.hiOffset) {
                                batches = false;
                                continue;
                            }
                            if (b.maxTimestamp() < piece.loTimestamp) {
                                continue;
                            }
                        }
                    }
                    codecId = strings.id(b.compressionType().name);
                    timestampType = b.timestampType().id;
                    leaderEpoch = b.partitionLeaderEpoch();
                    producerId = b.producerId();
                    producerEpoch = b.producerEpoch();
                    transactional = b.isTransactional();
                    control = b.isControlBatch();
                    this.magic = magic;
                    try {
                        records = b.streamingIterator(buffers);
                    } catch (RuntimeException e) {
                        throw where(batchPosition, "the records of the batch cannot be decoded: " + reason(e), e);
                    }
                    continue;
                }
                if (file != null) {
                    file.close();
                    file = null;
                    if (batches && nextPosition < piece.end) {
                        // FileRecords stops quietly before an entry that does not fit: the Python source's error
                        throw where(nextPosition, (piece.end - nextPosition) + " bytes at the end of the segment are "
                                + "a torn tail or a partial batch, not a complete batch", null);
                    }
                }
                batches = false;
                if (pieceIndex >= pieces.size()) {
                    return null;
                }
                piece = pieces.get(pieceIndex++);
                topicId = strings.id(piece.topic);
                segmentId = strings.id(piece.segment);
                nextPosition = piece.start;
                file = SegmentBatches.open(piece.path, piece.segment, piece.start, piece.end, hadoop, firstWindow,
                        maxWindow);
                if (!piece.holds(file)) {  // replaced since planning: fails, or the piece is skipped
                    SegmentBatches other = file;
                    file = null;
                    other.close();
                    dataLoss.replaced(piece, other);
                    continue;
                }
                batches = true;
            }
        }

        @Override
        public boolean next() throws IOException {
            for (int i = 0; i < cols.length; i++) {
                if (vectors[i] != null) {
                    vectors[i].reset();
                } else if (bytes[i] != null) {
                    bytes[i].reset();
                }
            }
            headerCount = 0;
            int n = 0;
            int most = 0;
            while (n < ROWS) {
                Record r = nextRecord();
                if (r == null) {
                    break;
                }
                run[0] = r;
                int k = 1;
                while (n + k < ROWS) {  // the rest of its batch: its window stays until the next batch is read
                    Record more = nextInBatch();
                    if (more == null) {
                        break;
                    }
                    run[k++] = more;
                }
                put(n, k);
                n += k;
                most = Math.max(most, k);
            }
            Arrays.fill(run, 0, most, null);
            batch.setNumRows(n);
            return n > 0;
        }

        /**
         * Rows {@code [row, row + k)}: the records {@code run[0, k)}, all of one batch, a column at a time (a
         * column of the batch's fields or the piece's is one fill).
         */
        private void put(int row, int k) {
            Record[] run = this.run;
            for (int i = 0; i < cols.length; i++) {
                OnHeapColumnVector v = vectors[i];
                switch (cols[i]) {
                    case KEY, VALUE -> {
                        ScanVectors.Bytes b = bytes[i];
                        boolean key = cols[i] == Col.KEY;
                        for (int j = 0; j < k; j++) {
                            b.put(row + j, key ? run[j].key() : run[j].value());
                        }
                    }
                    case TOPIC -> names[i].fill(row, k, topicId);
                    case PARTITION -> v.putInts(row, k, piece.partition);
                    case OFFSET -> {
                        for (int j = 0; j < k; j++) {
                            v.putLong(row + j, run[j].offset());
                        }
                    }
                    case TIMESTAMP -> {
                        for (int j = 0; j < k; j++) {
                            long t = run[j].timestamp();
                            if (t > MAX_MS || t < -MAX_MS) {
                                v.putNull(row + j);
                            } else {
                                v.putLong(row + j, t * 1000);
                            }
                        }
                    }
                    case TIMESTAMP_TYPE -> v.putInts(row, k, timestampType);
                    case HEADERS -> {
                        for (int j = 0; j < k; j++) {
                            putHeaders(v, row + j, run[j].headers());
                        }
                    }
                    case TIMESTAMP_MS -> {
                        for (int j = 0; j < k; j++) {
                            v.putLong(row + j, run[j].timestamp());
                        }
                    }
                    case LEADER_EPOCH -> v.putInts(row, k, leaderEpoch);
                    case PRODUCER_ID -> v.putLongs(row, k, producerId);
                    case PRODUCER_EPOCH -> v.putInts(row, k, producerEpoch);
                    case SEQUENCE -> {
                        for (int j = 0; j < k; j++) {
                            v.putInt(row + j, run[j].sequence());
                        }
                    }
                    case IS_TRANSACTIONAL -> v.putBooleans(row, k, transactional);
                    case IS_CONTROL -> v.putBooleans(row, k, control);
                    case MAGIC -> v.putInts(row, k, magic);
                    case CODEC -> names[i].fill(row, k, codecId);
                    case SEGMENT -> names[i].fill(row, k, segmentId);
                    case POSITION -> v.putLongs(row, k, batchPosition);
                    default -> throw new IllegalStateException(cols[i].name());
                }
            }
        }

        private void putHeaders(OnHeapColumnVector v, int row, Header[] headers) {
            if (headers == null || headers.length == 0) {
                v.putNull(row);
                return;
            }
            WritableColumnVector structs = v.arrayData();
            WritableColumnVector keys = structs.getChild(0);
            WritableColumnVector values = structs.getChild(1);
            int base = headerCount;
            structs.reserve(base + headers.length);
            keys.reserve(base + headers.length);
            values.reserve(base + headers.length);
            for (int j = 0; j < headers.length; j++) {
                Header h = headers[j];
                int at = base + j;
                structs.putNotNull(at);
                byte[] k = h.key().getBytes(StandardCharsets.UTF_8);
                keys.putByteArray(at, k, 0, k.length);
                byte[] val = h.value();
                if (val == null) {
                    values.putNull(at);
                } else {
                    values.putByteArray(at, val, 0, val.length);
                }
            }
            v.putArray(row, base, headers.length);
            headerCount += headers.length;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() throws IOException {
            batch.close();
            if (records != null) {
                records.close();
                records = null;
            }
            if (file != null) {
                file.close();
                file = null;
            }
        }

    }
}
