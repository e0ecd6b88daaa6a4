# kiln: `make run` starts the server on :4040, `make test` runs the suite. Both set up the machine
# first (scripts/setup.sh), idempotently.
VENV := .venv
PYTEST_ARGS ?=

SOAK_SECONDS ?= 600

.PHONY: setup run test soak bench langs clean

setup:
	@scripts/setup.sh
	@langs/install-toolchains.sh python js

# every language's toolchain and workspace (Debian packages, npm, PyPI; minutes the first time)
langs: setup
	@langs/install-toolchains.sh

run: setup
	$(VENV)/bin/kiln serve

test: langs
	@scripts/install-deploy-tools.sh
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

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
