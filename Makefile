# trainsignals: `make dashboards` sets up and generates; `make test` runs every check.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
SCENARIO ?= healthy

.PHONY: setup tools dashboards generate check lint test bench fleet demo clean

setup: $(VENV)/.installed tools

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# promtool (Debian `prometheus`) and amtool (Debian `prometheus-alertmanager`); neither
# package starts a service here, the tests start their own on 127.0.0.1.
tools:
	@if ! command -v promtool >/dev/null || ! command -v amtool >/dev/null \
	    || ! command -v prometheus-alertmanager >/dev/null; then \
	  echo "installing prometheus and prometheus-alertmanager (Debian packages)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager; \
	fi

dashboards: setup generate

generate: $(VENV)/.installed
	$(BIN)/trainsignals generate

# Drift, rule hygiene, then promtool and amtool on every generated file.
check: setup
	$(BIN)/trainsignals check
	$(BIN)/trainsignals lint
	promtool check rules alerts/*.rules.yaml
	promtool check config deploy/prometheus/*.scrape.yaml
	cd alerts && promtool test rules *.test.yaml
	@if [ -f alerts/alertmanager.yaml ]; then amtool check-config alerts/alertmanager.yaml; fi

lint: $(VENV)/.installed
	$(BIN)/ruff check .

# Two workers: the real-stack tests (Prometheus, Alertmanager, simulator; mostly waiting on
# compressed time) stay together on one, everything else runs on the other.
# PYTEST_ARGS narrows the run (tests/test_teardown.py kills a `make test` of one file).
test: setup lint
	$(BIN)/pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

bench: setup
	$(BIN)/python bench/bench_generator.py
	$(BIN)/python bench/bench_gpu_exporter.py
	$(BIN)/python bench/bench_instrumentation.py
	$(BIN)/python bench/bench_fleet_cost.py

# 54 days of a 2,048-node job's fault history against the generated rules on a real
# Prometheus (trainsignals/fleet/); FLEET_DAYS=3 for a quick run.
FLEET_DAYS ?= 54
fleet: setup
	$(BIN)/python -m trainsignals.fleet --days $(FLEET_DAYS)

demo: setup
	$(BIN)/python -m trainsignals.demo --scenario $(SCENARIO)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
