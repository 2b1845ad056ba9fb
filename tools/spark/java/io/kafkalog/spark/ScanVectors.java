package io.kafkalog.spark;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The scan's column vectors for its byte and string columns, made for how Spark reads a batch: {@code
 * ColumnarToRow} asks each row of a binary column for a {@code byte[]} of its own ({@code getBinary}: an {@code
 * OnHeapColumnVector} copies the bytes out of its buffer into a new array per row) and each row of a string column
 * for a {@code UTF8String} (from a dictionary, a new one per row). {@link Bytes} keeps each row's bytes as the
 * array it hands out (one copy of a record's key or value, where the buffer took two); {@link Names} hands out one
 * {@code UTF8String} per distinct string, as Spark's own {@code ConstantColumnVector} does.
 */
final class ScanVectors {
    private ScanVectors() {
    }

    /** The parts a read-only vector does not have: Spark asks a column only for its own type's values. */
    abstract static class ReadOnly extends ColumnVector {
        ReadOnly(DataType type) {
            super(type);
        }

        private UnsupportedOperationException no(String what) {
            return new UnsupportedOperationException("kafkalog scan: a " + dataType().simpleString() + " column has no "
                    + what);
        }

        @Override
        public void close() {
        }

        @Override
        public boolean getBoolean(int rowId) {
            throw no("booleans");
        }

        @Override
        public byte getByte(int rowId) {
            throw no("bytes");
        }

        @Override
        public short getShort(int rowId) {
            throw no("shorts");
        }

        @Override
        public int getInt(int rowId) {
            throw no("ints");
        }

        @Override
        public long getLong(int rowId) {
            throw no("longs");
        }

        @Override
        public float getFloat(int rowId) {
            throw no("floats");
        }

        @Override
        public double getDouble(int rowId) {
            throw no("doubles");
        }

        @Override
        public ColumnarArray getArray(int rowId) {
            throw no("arrays");
        }

        @Override
        public ColumnarMap getMap(int ordinal) {
            throw no("maps");
        }

        @Override
        public Decimal getDecimal(int rowId, int precision, int scale) {
            throw no("decimals");
        }

        @Override
        public ColumnVector getChild(int ordinal) {
            throw no("children");
        }
    }

    /** A binary column ({@code key}, {@code value}): each row's bytes in an array of its own, null for null. */
    static final class Bytes extends ReadOnly {
        private final byte[][] rows;
        /** The rows written since {@link #reset} (their arrays are let go at the next). */
        private int written;
        private int nulls;

        Bytes(DataType type, int capacity) {
            super(type);
            rows = new byte[capacity][];
        }

        void reset() {
            Arrays.fill(rows, 0, written, null);
            written = 0;
            nulls = 0;
        }

        /** Row {@code row} (the next one) holds the bytes {@code b} has left, or null. */
        void put(int row, ByteBuffer b) {
            written = row + 1;
            if (b == null) {
                nulls++;
                return;
            }
            byte[] a = new byte[b.remaining()];
            if (b.hasArray()) {
                System.arraycopy(b.array(), b.arrayOffset() + b.position(), a, 0, a.length);
            } else {
                b.duplicate().get(a);
            }
            rows[row] = a;
        }

        @Override
        public boolean hasNull() {
            return nulls > 0;
        }

        @Override
        public int numNulls() {
            return nulls;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return rows[rowId] == null;
        }

        /** The row's array itself (never written again: a row gets a new one). */
        @Override
        public byte[] getBinary(int rowId) {
            return rows[rowId];
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            byte[] a = rows[rowId];
            return a == null ? null : UTF8String.fromBytes(a);
        }
    }

    /**
     * The strings of the columns that hold one value per piece or per batch ({@code topic}, {@code segment}, {@code
     * codec}): each distinct one once, with its {@code UTF8String}. Shared by a reader's {@link Names} columns.
     */
    static final class Strings {
        private final List<UTF8String> values = new ArrayList<>();
        private final Map<String, Integer> ids = new HashMap<>();

        int id(String s) {
            return ids.computeIfAbsent(s, k -> {
                values.add(UTF8String.fromBytes(k.getBytes(StandardCharsets.UTF_8)));
                return values.size() - 1;
            });
        }

        UTF8String get(int id) {
            return values.get(id);
        }
    }

    /** A string column that is never null ({@code topic}, {@code segment}, {@code codec}): a number per row. */
    static final class Names extends ReadOnly {
        private final int[] ids;
        private final Strings strings;

        Names(DataType type, int capacity, Strings strings) {
            super(type);
            ids = new int[capacity];
            this.strings = strings;
        }

        /** Rows {@code [row, row + count)} hold string {@code id}. */
        void fill(int row, int count, int id) {
            Arrays.fill(ids, row, row + count, id);
        }

        @Override
        public boolean hasNull() {
            return false;
        }

        @Override
        public int numNulls() {
            return 0;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return false;
        }

        /** The string's one {@code UTF8String} (Spark copies a value it keeps, as from its ConstantColumnVector). */
        @Override
        public UTF8String getUTF8String(int rowId) {
            return strings.get(ids[rowId]);
        }

        @Override
        public byte[] getBinary(int rowId) {
            return strings.get(ids[rowId]).getBytes();
        }
    }
}
