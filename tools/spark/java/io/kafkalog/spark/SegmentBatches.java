package io.kafkalog.spark;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.util.VersionInfo;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.record.internal.LegacyRecord;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.Records;

/**
 * The record batches of one planned piece (bytes {@code [start, end)} of a segment), in order, read by positioned
 * reads of bounded windows and decoded by kafka-clients' {@code MemoryRecords}: a local segment through its file
 * channel, a segment under a URL ({@code s3a://}, {@code hdfs://}, any scheme of Hadoop's {@code FileSystem}; the
 * planner names it so) through Hadoop's {@code FileSystem}. Both stop before bytes that are not a whole batch (the
 * reader reports them as a torn tail) and raise Kafka's {@code CorruptRecordException} for a size below a record's
 * overhead, as {@code FileRecords} does.
 */
public abstract class SegmentBatches implements Closeable {
    /**
     * Why this session's JVM cannot open files of the Hadoop FileSystem {@code schemes} (comma-separated: {@code
     * s3a,hdfs}), or null: no FileSystem class for one ({@code s3a} without hadoop-aws, which the message names in
     * the version of this Hadoop).
     */
    public static String missingFileSystem(String schemes) {
        Configuration conf = org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf();
        for (String scheme : schemes.split(",")) {
            if (scheme.isEmpty()) {
                continue;
            }
            try {
                FileSystem.getFileSystemClass(scheme, conf);
            } catch (IOException | RuntimeException | LinkageError e) {
                String add = scheme.equals("s3a") ? ": add org.apache.hadoop:hadoop-aws:" + VersionInfo.getVersion()
                        + " to spark.jars.packages (spark-submit --packages)" : "";
                return scheme + ":// has no Hadoop FileSystem in this session (" + e.getMessage() + ")" + add;
            }
        }
        return null;
    }


    /** The windows of a remote read when the plan names none (the planner's: {@code kafkalog.storage.io.fs}). */
    static final int FIRST_WINDOW = 64 * 1024;
    static final int MAX_WINDOW = 16 * 1024 * 1024;

    /** The next batch, or null at the end of the piece or before bytes that are not a whole batch. */
    abstract RecordBatch next() throws IOException;

    /** Where the batch {@link #next} returned last starts in the segment. */
    long position;

    /**
     * The file opened, as the planner's {@code FileStamp} has a file: its size, modification time (ms) and inode (-1
     * where the file system gives none), taken when it was opened (the reader compares them with the plan's).
     */
    long size;
    long mtime;
    long inode = -1;

    /** A piece path with a scheme ({@code s3a://...}) is read through Hadoop; the planner gives local paths bare. */
    static boolean isHadoop(String path) {
        return path.contains("://");
    }

    static SegmentBatches open(String path, String segment, int start, int end, Configuration hadoop, int firstWindow,
            int maxWindow) throws IOException {
        if (!isHadoop(path)) {
            return new Local(path, segment, start, end);
        }
        if (hadoop == null) {
            throw new IllegalStateException("kafkalog segment scan: " + segment + " is read through Hadoop's "
                    + "FileSystem, and the scan was given no Hadoop configuration");
        }
        return new Remote(path, segment, start, end, hadoop, firstWindow, maxWindow);
    }

    /**
     * Windows of the piece read by positioned reads into one reused buffer (the first {@code firstWindow} bytes,
     * then each window twice the last, up to {@code maxWindow}; a batch larger than that gets a window of its own
     * size), each batch decoded by kafka-clients' {@code MemoryRecords} over the window: a piece is never held
     * whole in memory, and no batch costs a read or a buffer of its own. A batch is read before the next one is
     * asked for (the reader copies its values into column vectors), so the next window may overwrite it.
     */
    abstract static class Windowed extends SegmentBatches {
        private final String segment;
        private final long end;
        private final int maxWindow;
        private int window;
        /** The bytes of the segment from {@link #windowStart} (reused: grown, never shrunk). */
        private byte[] bytes = new byte[0];
        private ByteBuffer buf = ByteBuffer.wrap(bytes, 0, 0);
        private long windowStart;
        private long next;

        Windowed(String segment, long start, long end, int firstWindow, int maxWindow) {
            this.segment = segment;
            this.end = end;
            this.next = start;
            this.windowStart = start;
            this.window = Math.max(firstWindow, Records.HEADER_SIZE_UP_TO_MAGIC);
            this.maxWindow = Math.max(maxWindow, this.window);
        }

        /** Reads bytes {@code [at, at + len)} of the segment into {@code into[0, len)}. */
        abstract void read(long at, byte[] into, int len) throws IOException;

        /** Makes the window hold bytes {@code [at, at + n)} (n no more than the bytes left in the piece). */
        private void have(long at, int n) throws IOException {
            if (at >= windowStart && at + n <= windowStart + buf.limit()) {
                return;
            }
            int len = (int) Math.min(Math.max(n, window), end - at);
            if (bytes.length < len) {
                bytes = new byte[len];
            }
            try {
                read(at, bytes, len);
            } catch (IOException e) {
                throw new IOException("kafkalog segment scan: " + segment + ": byte " + at + ": cannot read " + len
                        + " bytes: " + e.getMessage(), e);
            }
            buf = ByteBuffer.wrap(bytes, 0, len);
            windowStart = at;
            window = (int) Math.min((long) window * 2, maxWindow);
        }

        @Override
        RecordBatch next() throws IOException {
            long at = next;
            if (at + Records.HEADER_SIZE_UP_TO_MAGIC >= end) {  // FileLogInputStream's bound
                return null;
            }
            have(at, Records.HEADER_SIZE_UP_TO_MAGIC);
            int i = (int) (at - windowStart);
            int size = buf.getInt(i + Records.SIZE_OFFSET);
            if (size < LegacyRecord.RECORD_OVERHEAD_V0) {
                throw new CorruptRecordException(String.format("Found record size %d smaller than minimum record "
                        + "overhead (%d)", size, LegacyRecord.RECORD_OVERHEAD_V0));
            }
            long total = (long) size + Records.LOG_OVERHEAD;
            if (at + total > end) {
                return null;
            }
            have(at, (int) total);
            i = (int) (at - windowStart);
            ByteBuffer one = buf.duplicate();
            one.position(i).limit(i + (int) total);
            RecordBatch b = MemoryRecords.readableRecords(one.slice()).batchIterator().next();
            position = at;
            next = at + total;
            return b;
        }
    }

    /**
     * A local segment, by positioned reads of its channel in windows of {@link #LOCAL_WINDOW} (cut at the file's
     * end, as {@code FileRecords.slice} cuts a slice: the bytes of a piece past it read as a torn tail).
     */
    static final class Local extends Windowed {
        /** A window that stays in the CPU's cache while its batches are decoded. */
        static final int LOCAL_WINDOW = 1024 * 1024;
        private final FileChannel channel;

        Local(String path, String segment, int start, int end) throws IOException {
            this(FileChannel.open(Path.of(path), StandardOpenOption.READ), segment, start, end);
            Path file = Path.of(path);
            try {
                Map<String, Object> a = Files.readAttributes(file, "unix:size,lastModifiedTime,ino");
                size = (Long) a.get("size");
                mtime = ((FileTime) a.get("lastModifiedTime")).toMillis();
                inode = (Long) a.get("ino");
            } catch (UnsupportedOperationException e) {  // no unix view: no inode
                BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
                size = a.size();
                mtime = a.lastModifiedTime().toMillis();
            } catch (IOException e) {
                channel.close();
                throw e;
            }
        }

        private Local(FileChannel channel, String segment, int start, int end) throws IOException {
            super(segment, start, Math.min(end, channel.size()), LOCAL_WINDOW, LOCAL_WINDOW);
            this.channel = channel;
        }

        @Override
        void read(long at, byte[] into, int len) throws IOException {
            ByteBuffer b = ByteBuffer.wrap(into, 0, len);
            while (b.hasRemaining()) {
                if (channel.read(b, at + b.position()) < 0) {
                    throw new EOFException("the file ends at byte " + (at + b.position()));
                }
            }
        }

        @Override
        public void close() throws IOException {
            channel.close();
        }
    }

    /** A segment under a URL: windows read by Hadoop's positioned reads, growing from the planner's first. */
    static final class Remote extends Windowed {
        private final FSDataInputStream in;

        Remote(String path, String segment, long start, long end, Configuration hadoop, int firstWindow, int maxWindow)
                throws IOException {
            super(segment, start, end, firstWindow, maxWindow);
            org.apache.hadoop.fs.Path file = new org.apache.hadoop.fs.Path(path);
            FileSystem fs = file.getFileSystem(hadoop);
            FileStatus status = fs.getFileStatus(file);
            size = status.getLen();
            mtime = status.getModificationTime();
            this.in = fs.open(file);
        }

        @Override
        void read(long at, byte[] into, int len) throws IOException {
            in.readFully(at, into, 0, len);
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }
}
