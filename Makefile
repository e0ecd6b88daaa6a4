# kiln: `make run` starts the server on :4040, `make run-rootless` the same without root (as the
# user kiln, scripts/rootless.sh), `make test` runs the suite. Each sets up the machine first
# (scripts/setup.sh), idempotently.
VENV := .venv
PYTEST_ARGS ?=

SOAK_SECONDS ?= 600
ROOTLESS_SUITES ?= tests/api tests/security tests/langs
# what a prestarted compiler answers is its workspace's, the same in either mode (its slot's
# confinement is every prestarted slot's, which tests/api checks rootless): once is enough, and
# its kotlin cases take ~2 minutes
ROOTLESS_SKIP ?= --ignore=tests/langs/test_jvm_prestart.py

.PHONY: setup run run-rootless test test-stock-vm soak bench langs clean

setup:
	@scripts/setup.sh
	@langs/install-toolchains.sh python js

# every language's toolchain and workspace (Debian packages, npm, PyPI; minutes the first time)
langs: setup
	@langs/install-toolchains.sh

run: setup
	$(VENV)/bin/kiln serve

# run as root: makes the user, its id range and cgroup subtree, then starts kiln as that user
run-rootless: setup
	@scripts/rootless.sh serve

# the whole suite as root, then the api, security and language suites against rootless servers,
# then kiln on a stock Debian 12 host (cgroup v2, systemd, Debian's kernel) in a VM
test: langs
	@scripts/install-deploy-tools.sh
	@scripts/rootless.sh prepare
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)
	KILN_TEST_ROOTLESS=1 $(VENV)/bin/python -m pytest -q $(PYTEST_ARGS) $(ROOTLESS_SKIP) $(ROOTLESS_SUITES)
	@scripts/stock-vm-test.sh test

# the stock VM's part of `make test` alone (scripts/stock-vm-test.sh: test, bench, shell)
test-stock-vm:
	@scripts/stock-vm-test.sh test

# the soak test for longer than the 60 s `make test` gives it (SOAK_SECONDS=...)
soak: langs
	$(VENV)/bin/python -m pytest -q -s tests/soak --soak-seconds=$(SOAK_SECONDS)

# wrk makes the load: a Python generator's own CPU would be taken from the cores kiln runs on
bench: setup
	@scripts/setup.sh wrk
	$(VENV)/bin/python bench/latency.py
	$(VENV)/bin/python bench/cpu.py
	$(VENV)/bin/python bench/judge.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache kiln/native/build
