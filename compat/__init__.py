"""kafkalog.compat: the bridge to real Apache Kafka (tests, benchmarks, fixtures; storage never imports it).

* :mod:`~kafkalog.compat.jars`     fetch Kafka's jars from Maven Central with Maven (``ensure_kafka``), find the JDK
* :mod:`~kafkalog.compat.broker`   run a single-node broker (KRaft, or ZooKeeper for 3.x) on loopback: ``Broker``,
  ``ContainerBroker``, ``make_broker``
* :mod:`~kafkalog.compat.clients`  produce/consume/admin through kafka-python and confluent-kafka
* :mod:`~kafkalog.compat.tools`    run DumpLogSegments and parse it into ``kafkalog dump --json`` structures
* :mod:`~kafkalog.compat.capture`  ``python -m kafkalog.compat.capture --out fixtures/``: the real-broker fixtures
* :mod:`~kafkalog.compat.pytest_plugin`  the ``kafka`` marker policy and broker fixtures for pytest
"""
