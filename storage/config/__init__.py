"""Topic and broker configuration with Kafka's names and defaults, and the one resolver."""
