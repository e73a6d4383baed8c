# trainsignals: `make dashboards` sets up and generates; `make test` runs every check.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
SCENARIO ?= healthy

.PHONY: setup tools dashboards generate check lint test wheel image chaos e2e-vm e2e-sharded bench fleet demo clean

setup: $(VENV)/.installed-test tools

# The venv itself, made once; the stamps below install into it (order-only: a newer python
# does not reinstall).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Two stamps, one venv. The base package is all generating needs (`make dashboards`: ~0.2 GB);
# the test extras add torch, transformers and lightning (~1.5 GB) for the callback tests.
$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# The package and its test extras in one resolution: after the base install, a second
# editable build and resolution of the same package cost ~20 s of a clean clone's setup. The
# extras pin torch to 2.13.0, the CPU build (an unpinned torch pulls a multi-GB CUDA build):
# the callback tests train tiny models on CPU.
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,hf,lightning]'
	touch $(VENV)/.installed-base $@

# promtool (Debian `prometheus`) and amtool (Debian `prometheus-alertmanager`); neither
# package starts a service here, the tests start their own on 127.0.0.1.
tools:
	@if ! command -v promtool >/dev/null || ! command -v amtool >/dev/null \
	    || ! command -v prometheus-alertmanager >/dev/null || ! command -v vmalert >/dev/null; then \
	  echo "installing prometheus, prometheus-alertmanager, victoria-metrics (Debian packages)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager \
	    victoria-metrics; \
	fi

# Generating needs neither the test extras nor promtool/amtool (`make check` installs those).
dashboards: generate

generate: $(VENV)/.installed-base
	$(BIN)/trainsignals generate

# Drift, rule hygiene, then promtool and amtool on every generated file. The rule tests run one
# promtool per file, as many at once as there are cores, largest first (each evaluates its
# rules minute by minute on about one core: 214 s in a row here, 153 s on two cores).
check: $(VENV)/.installed-base tools
	$(BIN)/trainsignals check
	$(BIN)/trainsignals lint
	promtool check rules alerts/*.rules.yaml
	promtool check config deploy/prometheus/*.scrape.yaml
	cd alerts && ls -S *.test.yaml | xargs -P "$$(nproc)" -n 1 promtool test rules
	@if [ -f alerts/alertmanager.yaml ]; then amtool check-config alerts/alertmanager.yaml; fi

# lint-imports from the root: trainsignals/ is the package (its generator, exporters and
# simulator are links to the top-level folders), so it reads the modules Python imports.
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/hadolint Containerfile

# Six workers on two cores. The stack tests (Prometheus, Alertmanager, simulators; mostly
# waiting on compressed time) are three xdist groups, each on a worker of its own at nice -10:
# the Prometheus scenario matrix (tests/e2e/test_scenarios.py, ~380 s, its healthy simulated
# day alone 360 s: the suite's floor), the other tests/e2e topologies (~240 s, the
# VictoriaMetrics matrix among them) and every other stack test (~175 s). The other workers
# run everything else at nice 10 (promtool, the fleet replay, torch), and the tests that wait
# without a stack group (the short chaos tests, the wheel walkthrough: ~250 s of waiting) no
# longer hold one of only two CPU-bound workers. README, "How the suite shares two cores".
# The longer fault tests (`chaos_full`) run in `make chaos`; the short ones run here.
# PYTEST_ARGS narrows the run (tests/test_teardown.py kills a `make test` of one file).
# exec: the quotes make `make` run a shell; exec keeps pytest its direct child, so a SIGTERM
# to make reaches the suite (tests/test_teardown.py).
test: setup lint
	exec $(BIN)/pytest -q -n 6 --dist loadgroup -m "not chaos_full" $(PYTEST_ARGS)

# Every fault test on the real pipeline (~8 min): Alertmanager and Prometheus killed and
# restarted, a cluster member lost, a receiver answering 500, a failing rule, a stopped
# heartbeat. Prints the table of pages expected, delivered, duplicated and their delay.
chaos: setup
	@mkdir -p .chaos && rm -f .chaos/results.md
	TRAINSIGNALS_CHAOS_TABLE=.chaos/results.md $(BIN)/pytest -q tests/chaos
	@cat .chaos/results.md

# Every page scenario on vmagent + VictoriaMetrics + vmalert (the suite runs the short ones).
e2e-vm: setup
	TRAINSIGNALS_VM_SCENARIOS=all $(BIN)/pytest -q tests/e2e/test_vm_scenarios.py

# The sharded topology (2 Prometheus shards + VictoriaMetrics + vmalert): every scenario it
# covers, healthy, GPU lost, hang, throughput drop and a dead shard (the suite runs two).
e2e-sharded: setup
	TRAINSIGNALS_SHARDED=all $(BIN)/pytest -q tests/e2e/test_sharded.py

# Costs per item or ratios, at the README machine's speed (bench/figures.py: a reference loop
# measured around each measurement); what describes the machine itself is on `machine:` lines.
# On this 2-core machine two idle runs still differ by over 20% in some figures (the
# generator's and Prometheus's costs follow memory more than the loop; README, "Benchmark
# figures that agree between runs"). Two runs compared:
#   make bench > a.txt; make bench > b.txt; .venv/bin/python bench/compare.py a.txt b.txt
bench: setup
	$(BIN)/python bench/bench_generator.py
	$(BIN)/python bench/bench_gpu_exporter.py
	$(BIN)/python bench/bench_instrumentation.py
	$(BIN)/python bench/bench_fleet_cost.py
	$(BIN)/python bench/bench_sharded.py
	$(BIN)/python bench/bench_nodes.py

# 54 days of a 2,048-node job's fault history against the generated rules on a real
# Prometheus (trainsignals/fleet/); FLEET_DAYS=3 for a quick run.
FLEET_DAYS ?= 54
# FLEET_SHARDS > 1: through the sharded rule split (edge + global rules, generator/deploy/sharding/).
FLEET_SHARDS ?= 1
# FLEET_MODE: the spec's recovery.mode, auto_restart or manual (every interruption pages once).
FLEET_MODE ?= auto_restart
fleet: setup
	$(BIN)/python -m trainsignals.fleet --days $(FLEET_DAYS) --shards $(FLEET_SHARDS) --mode $(FLEET_MODE)

# Neither the demo nor the wheel needs the test extras (torch and friends, ~1.5 GB).
demo: $(VENV)/.installed-base tools
	$(BIN)/python -m trainsignals.demo --scenario $(SCENARIO) --spec jobs/minimal.yaml --out .demo

# The sdist and the wheel (tests/test_wheel_install.py installs the wheel into a fresh venv).
# An old *.egg-info's file list would leak into the sdist: build from a clean slate.
$(VENV)/.installed-build: $(VENV)/.installed-base
	$(BIN)/pip install -q 'build>=1.2'
	touch $@

wheel: $(VENV)/.installed-build
	rm -rf build *.egg-info
	$(BIN)/python -m build --outdir dist .

# The GPU exporter's image, tagged with every image the specs' DaemonSets name (`trainsignals
# image`). Any builder with `build -f -t`: buildah (chroot isolation works without a daemon),
# podman, docker. It pulls the pinned base image from docker.io.
CONTAINER_BUILD ?= buildah build --isolation chroot
image: $(VENV)/.installed-base
	images="$$($(BIN)/trainsignals image)" && \
	  $(CONTAINER_BUILD) -f Containerfile $$(printf -- '-t %s ' $$images) .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist *.egg-info
