# kafkalog: the two commands of the README's quick start, and helpers.
# .ci/py: the project virtualenv .venv (made on first use from $PYTHON or python3; system packages untouched)
PY ?= .ci/py
PIP ?= $(PY) -m pip
KAFKA_VERSIONS ?=

.PHONY: quickstart test test-older install install-test kafka-jars container-image lint fuzz fuzz-atheris fuzz-native bench campaign

## quickstart: install kafkalog and run its main job (verify + describe) on the bundled real-Kafka fixtures
quickstart:
	$(PIP) install -q -e .
	$(PY) -m kafkalog.tools.quickstart

## test: install everything the tests need (Python packages, Kafka jars through Maven, Spark, the container
## backend's image where a Docker engine answers) and run them, in two lanes at once (.ci/lanes): the broker
## lane (test-older, then every test marked kafka) beside the main lane (every other test)
test: install-test kafka-jars
	@if docker info >/dev/null 2>&1; then $(MAKE) container-image || [ "$$CI" != "true" ]; \
	else echo "no Docker engine answers: the container-backend tests skip (and fail under CI=true)"; fi
	PY=$(PY) MAKE=$(MAKE) .ci/lanes

## test-older: the older Kafka line (2.8.2, ZooKeeper mode, on the same JDK 17): harness, certify + conformance
test-older:
	$(PY) -m kafkalog.compat.jars 2.8.2
	KAFKALOG_KAFKA_VERSIONS=2.8.2 $(PY) -m pytest -m kafka tests/kafka/test_kafka_harness.py \
		tests/kafka/test_certify.py::test_a_kafka_before_3_3_certifies_in_zookeeper_mode
	$(PY) -m kafkalog.tools.cli conformance --kafka 2.8.2 --mode zk

install:
	$(PIP) install -q -e .

install-test:
	$(PIP) install -q -e '.[all]'

kafka-jars:
	$(PY) -m kafkalog.compat.jars $(KAFKA_VERSIONS)

## container-image: the broker image the container backend runs, built here from Debian's packages and the
## Maven Central jars (once per machine; needs Docker and mmdebstrap)
container-image:
	$(PY) -m kafkalog.compat.image

lint:
	$(PY) -m ruff check .
	.ci/imports

## fuzz: the long fuzz runs: the hypothesis runs (marker slow), then every atheris target and every cargo-fuzz
## target for FUZZ_RUNS inputs each (or FUZZ_SECONDS each), counted into FUZZ_LOG (see CONTRIBUTING.md)
FUZZ_RUNS ?= 10000000
FUZZ_SECONDS ?=
FUZZ_LOG ?= fuzz-runs.jsonl
FUZZ_ARGS ?=
FUZZ_LIMIT = $(if $(FUZZ_SECONDS),--seconds $(FUZZ_SECONDS),--runs $(FUZZ_RUNS)) $(FUZZ_ARGS)
fuzz:
	$(PY) -m pytest -m slow tests/fuzz
	$(MAKE) fuzz-native fuzz-atheris

## fuzz-atheris: coverage-guided fuzzing of the Python parsers and the native-vs-Python differential (atheris)
fuzz-atheris:
	$(PY) tests/fuzz/run_fuzz.py atheris $(FUZZ_LIMIT) --log $(FUZZ_LOG)

## fuzz-native: cargo-fuzz on the compiled core (AddressSanitizer; stable Rust with RUSTC_BOOTSTRAP=1)
fuzz-native:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	$(PY) tests/fuzz/run_fuzz.py native $(FUZZ_LIMIT) --log $(FUZZ_LOG)

## campaign: the full counted reliability campaigns (every fault injection point), kafkalog's writers
## certified on the other Kafka versions (3.9.2; 2.8.2 when KAFKALOG_KAFKA_VERSIONS names it), and the broker
## runs CI samples (every command killed mid-apply, the trimmed metadata logs, internal.segment.bytes, 3.9.2's
## cleaner recipe, cleaner rounds, recovery and torn tails, the cleaner recipe and the conformance scenarios on the
## container backend, doctor over S3 on every fixture), not part of `make test`
campaign:
	$(PY) -m pytest -s -m campaign tests/reliability tests/storage/test_apply_crash.py \
		tests/spark/test_write_faults_spark.py tests/kafka/test_write_faults_broker.py tests/storage/test_open_url.py \
		tests/kafka/test_certify_writers.py tests/kafka/test_apply_crash_broker.py tests/kafka/test_engine_core_diff.py \
		tests/kafka/test_cleaner_diff.py tests/kafka/test_cleaner_diff_rounds.py tests/kafka/test_recovery_diff.py \
		tests/kafka/test_doctor_broker.py tests/kafka/test_kafka_container.py

bench:
	$(PY) tests/benchmarks/run_all.py
