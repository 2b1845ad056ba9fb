"""Transaction bookkeeping of a cleaning round (``CleanedTransactionMetadata``, docs/semantics.md#transactions-in-the-cleaner)."""

from __future__ import annotations

import heapq

from kafkalog.storage.files.txn_index import AbortedTxn
from kafkalog.storage.records.control import ABORT, COMMIT, parse_control_key


class CleanedTransactionMetadata:
    """Decides which transactional batches and markers a round may discard.

    ``cleaned_index`` collects the aborted transactions whose marker is kept in the segment being written
    (set it to a fresh list per output segment; ``None`` while building the offset map).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, AbortedTxn]] = []
        self._seq = 0
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, list] = {}  # pid -> [AbortedTxn, lastObservedBatchOffset | None]
        self.cleaned_index: list[AbortedTxn] | None = None

    def add_aborted_transactions(self, txns) -> None:
        for t in txns:
            heapq.heappush(self._heap, (t.first_offset, self._seq, t))
            self._seq += 1

    def consume_up_to(self, offset: int) -> None:
        """What reading plain (non-transactional, non-control) batches up to ``offset`` does to this state."""
        if self._heap:
            self._consume_up_to(offset)

    def _consume_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            t = heapq.heappop(heap)[2]
            if t.producer_id not in self.ongoing_aborted:
                self.ongoing_aborted[t.producer_id] = [t, None]

    def on_control_batch_read(self, batch) -> bool:
        """True when the control batch may be discarded."""
        self._consume_up_to(batch.last_offset)
        first = next(iter(batch.iter_record_tuples()), None)
        if first is None:
            return True  # an empty control batch was already cleaned
        _, ctype = parse_control_key(first[2])
        pid = batch.producer_id
        if ctype == ABORT:
            meta = self.ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if ctype == COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch) -> bool:
        """True when the data batch belongs to an aborted transaction (discard it)."""
        if self._heap:
            self._consume_up_to(batch.last_offset)
        if batch.is_transactional:
            meta = self.ongoing_aborted.get(batch.producer_id)
            if meta is not None:
                meta[1] = batch.last_offset
                return True
            self.ongoing_committed.add(batch.producer_id)
        return False
