# moescope: `make demo` to see it, `make test` to check it. See README.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export MOESCOPE_TEST_POSTGRES_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test

.PHONY: install demo serve test check lint postgres bench clean plotly-bundle regenerator-runtime \
	docs-assets

install: $(VENV)/.installed

# Every extra: the server (service, dashboard), the runner (torch pinned to the CPU build
# CI machines hold locally) and the test tools, since the tests exercise all of them.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[server,runner,dev]'
	touch $@

demo: install
	$(BIN)/moescope serve --demo --host 127.0.0.1 --port 8000

# Start a stopped local Postgres cluster (Debian's pg_ctlcluster), if this machine has one.
postgres:
	@if command -v pg_ctlcluster >/dev/null 2>&1; then \
	  for v in $$(ls /etc/postgresql 2>/dev/null); do \
	    pg_ctlcluster --skip-systemctl-redirect $$v main start 2>/dev/null || true; \
	  done; \
	fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

check: lint

test: install postgres lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install postgres
	$(BIN)/python bench/ingest_reads.py $(BENCH_ARGS)

# The dashboard draws with plotly.js's cartesian partial bundle (scatter, bar, heatmap: a
# third of the full bundle's size), the version plotly.py ships; refresh it after a plotly
# upgrade (needs npm and the npm registry).
plotly-bundle: install
	version=$$($(BIN)/python -c 'from plotly.offline import get_plotlyjs_version as v; print(v())') && \
	tmp=$$(mktemp -d) && cd $$tmp && npm pack --silent plotly.js-cartesian-dist-min@$$version >/dev/null && \
	tar xzf plotly.js-cartesian-dist-min-$$version.tgz && \
	cp package/plotly-cartesian.min.js $(CURDIR)/static/vendor/plotly-cartesian.min.js && rm -rf $$tmp

# Dash's lazy component loader needs regeneratorRuntime, which the dashboard serves instead
# of Babel's whole polyfill (app/dashboard/__init__.py says why); MIT, Facebook.
REGENERATOR_RUNTIME_VERSION := 0.14.1
regenerator-runtime:
	tmp=$$(mktemp -d) && cd $$tmp && \
	npm pack --silent regenerator-runtime@$(REGENERATOR_RUNTIME_VERSION) >/dev/null && \
	tar xzf regenerator-runtime-$(REGENERATOR_RUNTIME_VERSION).tgz && \
	cp package/runtime.js $(CURDIR)/static/vendor/regenerator-runtime.js && rm -rf $$tmp

# /docs and /redoc draw with these, served by the app itself (an air-gapped cluster has no
# CDN); refresh with the versions below (needs npm and the npm registry). Redoc's sidebar
# footer loads its logo from its CDN, unconditionally: the URL is emptied, so the image
# hides itself (its onError) and the page fetches nothing from outside.
SWAGGER_UI_VERSION := 5.35.0
REDOC_VERSION := 2.5.4
DOCS_ASSETS := app/api/docs_assets
docs-assets:
	tmp=$$(mktemp -d) && cd $$tmp && \
	npm pack --silent swagger-ui-dist@$(SWAGGER_UI_VERSION) redoc@$(REDOC_VERSION) >/dev/null && \
	tar xzf swagger-ui-dist-$(SWAGGER_UI_VERSION).tgz && \
	cp package/swagger-ui-bundle.js package/swagger-ui.css package/favicon-32x32.png $(CURDIR)/$(DOCS_ASSETS)/ && \
	cp package/LICENSE $(CURDIR)/$(DOCS_ASSETS)/swagger-ui.LICENSE && rm -rf package && \
	tar xzf redoc-$(REDOC_VERSION).tgz && \
	sed 's#https://cdn.redoc.ly/redoc/logo-mini.svg##' package/bundles/redoc.standalone.js \
	  > $(CURDIR)/$(DOCS_ASSETS)/redoc.standalone.js && \
	cp package/LICENSE $(CURDIR)/$(DOCS_ASSETS)/redoc.LICENSE && rm -rf $$tmp

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache test-output
