//! Which record columns an Arrow builder materialises (`ArrowRecords(capacity, columns)`): the column projection
//! of `LogDirs.to_arrow(columns=...)` and of a SQL scan, taken inside the decoder. A record is still parsed and
//! checked whole (its length, varints, header keys: the same batches are accepted or handed back either way);
//! only the buffers of the columns asked for are filled (no key, value or header bytes copied when none is
//! asked), and only those columns are built at finish.

/// Every column a builder can give: the data source's record columns, and `piece` (the unnamed form's stand-in
/// for topic, partition and segment).
pub(crate) const COLUMNS: [&str; 20] = [
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
    "timestampMs",
    "leaderEpoch",
    "producerId",
    "producerEpoch",
    "sequence",
    "isTransactional",
    "isControl",
    "magic",
    "codec",
    "segment",
    "position",
    "piece",
];

/// A set of `COLUMNS`, one bit each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Projection(u32);

impl Projection {
    /// Every column.
    pub(crate) const ALL: Projection = Projection((1 << COLUMNS.len()) - 1);

    /// The columns named (each one of `COLUMNS`); an unknown name is the error's text.
    pub(crate) fn of<S: AsRef<str>>(names: &[S]) -> Result<Projection, String> {
        let mut bits = 0;
        for name in names {
            let name = name.as_ref();
            match COLUMNS.iter().position(|c| *c == name) {
                Some(i) => bits |= 1 << i,
                None => return Err(format!("no record column {name:?} (one of {})", COLUMNS.join(", "))),
            }
        }
        Ok(Projection(bits))
    }

    /// Whether `name` is asked for.
    pub(crate) fn has(self, name: &str) -> bool {
        COLUMNS.iter().position(|c| *c == name).is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// What the record parse fills for these columns.
    pub(crate) fn fill(self) -> Fill {
        Fill {
            keys: self.has("key"),
            values: self.has("value"),
            headers: self.has("headers"),
            timestamps: self.has("timestamp") || self.has("timestampMs"),
            sequences: self.has("sequence"),
        }
    }
}

/// The per-record buffers a projection needs filled (offsets are always kept: they count the rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fill {
    pub keys: bool,
    pub values: bool,
    pub headers: bool,
    pub timestamps: bool,
    pub sequences: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_fill() {
        let p = Projection::of(&["partition", "value"]).unwrap();
        assert!(p.has("value") && p.has("partition") && !p.has("key"));
        assert_eq!(p.fill(), Fill { keys: false, values: true, headers: false, timestamps: false, sequences: false });
        assert!(Projection::of(&["nope"]).is_err());
        assert!(COLUMNS.iter().all(|c| Projection::ALL.has(c)));
        assert!(!Projection::of::<&str>(&[]).unwrap().fill().timestamps);
        assert!(Projection::of(&["timestampMs"]).unwrap().fill().timestamps);
    }
}
