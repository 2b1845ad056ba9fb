"""The log cleaner: the cleaning round (Kafka's Cleaner), its offset map, record filter, transaction rules and the partition runner."""
