"""Kafka's log layer: segments, the partition log (log start/end, high watermark, producer state, leader epochs), data dirs, and offset specs resolved through the indexes."""
