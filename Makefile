# fedkd: two commands do everything on a fresh machine with Python 3.11.
#   make book   set up .venv, prepare data, execute every chapter (quick profile), render the book
#   make test   set up .venv, prepare data, run the whole test suite (unit, end-to-end, nbval)
#   (make test-fast: the tests not marked slow, a contributor's loop under 2 minutes)
# Other targets: make chapter CH=knfu [PROFILE=quick|paper], make sweep CH=knfu [WORKERS=2],
# make notebooks, make benchmark (writes benchmarks/results/, which the book's Performance page
# shows). JOBS (default: the number of cores) processes run chapters and tests.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SHARED_DATA ?= ../shared/data
export FEDKD_DATA ?= $(HOME)/.cache/fedkd
# One torch thread per process: the chapters' small CNNs gain ~15% from a second thread when
# alone (M1: 2,547 vs 2,168 samples/s) but run up to 20x slower when processes share the cores.
# Override with OMP_NUM_THREADS=N make ... on a bigger machine.
export OMP_NUM_THREADS ?= 1
CHAPTERS := $(basename $(notdir $(wildcard notebooks/*.py)))
PROFILE ?= quick
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
WORKERS ?= $(JOBS)
LOGS := book/_build/logs

.PHONY: book book-pages grids generated test test-fast setup data chapter sweep notebooks benchmark clean ledger-cache

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[book,test,flower]'
	touch $@

# Offline copies from ../shared/data when they are there; otherwise the code falls back to
# torchvision's downloader (needs internet) and says what is missing if that fails too.
data: setup
	@if [ -f "$(FEDKD_DATA)/cifar10.npz" ] && [ -f "$(FEDKD_DATA)/mnist.npz" ] && [ -f "$(FEDKD_DATA)/fashion_mnist.npz" ]; then \
		echo "data: $(FEDKD_DATA) ready"; \
	elif [ -f "$(SHARED_DATA)/install.py" ]; then \
		$(BIN)/python $(SHARED_DATA)/install.py "$(FEDKD_DATA)"; \
	else \
		echo "data: no offline copies in $(SHARED_DATA); datasets will be downloaded on first use"; \
	fi

# `make book` is one make run with JOBS jobs: the experiment grids (one sweep process for every
# chapter's grid, JOBS worker processes) beside the verdicts (ledger-cache: computed once, on JOBS
# processes, into FEDKD_LEDGER_CACHE); then the chapters, JOBS at a time, one process each, each
# into its own log, with the generated pages beside them; then jupyter-book. A failing chapter
# stops the build, naming the chapter and its log. Each part says how long it took.
book: data
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory -j$(JOBS) book-pages PROFILE=$(PROFILE) JOBS=$(JOBS) BOOK_GRIDS=grids || exit 1; \
	echo "== grids, verdicts and chapters done in $$(( $$(date +%s) - start )) s"; \
	built=$$(date +%s); \
	$(BIN)/python tools/build_book.py --jobs $(JOBS) book/ || exit 1; \
	echo "== jupyter-book build done in $$(( $$(date +%s) - built )) s; make book took $$(( $$(date +%s) - start )) s"
	@echo "book: open book/_build/html/index.html"

# Make starts these in order as job slots free up, and a chapter met while the ledger cache is still
# being computed is put back behind the rest: so the cache starts first, the two long chapters that
# do not read it run beside it, then the chapters that read it, longest first, then the short ones
# (measured, issue 62: in alphabetical order FedCKD, KnFu and FedGMKD, the longest, ran last, one
# alone at the end). A chapter not named here comes after them.
LONGEST_FIRST := scaling add_your_method fedckd knfu fedgmkd fedua claims setting
BOOK_ORDER := $(filter $(CHAPTERS),$(LONGEST_FIRST)) $(filter-out $(LONGEST_FIRST),$(CHAPTERS))
book-pages: ledger-cache $(addprefix chapter-,$(BOOK_ORDER)) generated

# Every chapter's grid of the profile in one process (its imports paid once), JOBS workers on the
# runs: the chapters then find those records. Inside `make book` each chapter waits for it
# (BOOK_GRIDS); `make chapter-knfu` alone runs the chapter's own grid in its notebook.
grids: data
	@start=$$(date +%s); \
	$(BIN)/python -m fedkd_core.sweep $(CHAPTERS) --params "notebooks/params/$(PROFILE)/{chapter}.yaml" --workers $(JOBS) \
		|| { echo "error: the $(PROFILE) experiment grids failed (see the lines above)"; exit 1; }; \
	echo "== experiment grids done in $$(( $$(date +%s) - start )) s"

# The landing page's glance, the Performance and cluster pages' tables (the glance reads the ledger),
# in one process (tools/generated_pages.py): three processes each paid the package's import.
generated: ledger-cache
	@start=$$(date +%s); \
	$(BIN)/python tools/generated_pages.py book/_generated && \
	echo "== generated pages done in $$(( $$(date +%s) - start )) s"

# What the verdict pages compute from the committed records (every chapter's verdicts, the
# robustness grids' tables, ...) is computed once per build into FEDKD_LEDGER_CACHE
# (fedkd_core.chapters.ledger_cache), its independent parts on JOBS processes side by side; the
# pages that show verdicts then read it instead of each computing it again.
LEDGER_CHAPTERS := $(filter knfu fedckd fedua fedgmkd claims,$(CHAPTERS))
book: export FEDKD_LEDGER_CACHE ?= $(CURDIR)/book/_build/ledger_cache
$(addprefix chapter-,$(LEDGER_CHAPTERS)): ledger-cache

ledger-cache: data
	@if [ -n "$$FEDKD_LEDGER_CACHE" ]; then start=$$(date +%s); \
		$(BIN)/python -m fedkd_core.chapters.ledger_cache --jobs $(JOBS) || exit 1; \
		echo "== ledger cache done in $$(( $$(date +%s) - start )) s"; fi

chapter-%: data $(BOOK_GRIDS)
	@mkdir -p book/chapters $(LOGS)
	@echo "== chapter $* (profile $(PROFILE)) started, log: $(LOGS)/$*.log"
	@start=$$(date +%s); \
	if $(BIN)/python tools/ipc_kernels.py notebooks/$*.ipynb book/chapters/$*.ipynb \
			notebooks/params/$(PROFILE)/$*.yaml > $(LOGS)/$*.log 2>&1 \
		&& $(BIN)/python tools/hide_parameter_cells.py book/chapters/$*.ipynb >> $(LOGS)/$*.log 2>&1; then \
		echo "== chapter $* done in $$(( $$(date +%s) - start )) s"; \
	else \
		tail -n 30 $(LOGS)/$*.log; \
		echo "error: chapter $* failed (profile $(PROFILE)); its whole log: $(LOGS)/$*.log"; exit 1; \
	fi

chapter: data
	@mkdir -p book/chapters
	$(BIN)/papermill notebooks/$(CH).ipynb book/chapters/$(CH).ipynb -f notebooks/params/$(PROFILE)/$(CH).yaml

sweep: data
	$(BIN)/python -m fedkd_core.sweep $(CH) --params notebooks/params/paper/$(CH).yaml --workers $(WORKERS)

# Regenerate the .ipynb twins from the jupytext sources (notebooks/*.py are the source of truth).
notebooks: data
	$(BIN)/python tools/sync_notebooks.py $(CHAPTERS)

# One xdist worker per core; --dist loadfile keeps each file on one worker, and the chapters (nbval)
# with the book built from them (tests/conftest.py: pytest_xdist_make_scheduler);
# --durations lists the 25 slowest tests, so a CI log shows where its time went. pytest's exit
# status 5 (no tests collected) fails the target like any other failure, with a line saying so.
# PYTHONDONTWRITEBYTECODE is emptied (some machines set it): the suite starts many Python processes
# (kernels, Ray and sweep workers, Flower's ClientApps), and each would compile fedkd_core and
# pytest would rewrite every test module again, instead of reading what the first one wrote to
# __pycache__ (git ignores it).
test test-fast: export PYTHONDONTWRITEBYTECODE =
test: data
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile tests notebooks --nbval-lax -p no:cacheprovider --durations=25; status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests"; fi; exit $$status

# The contributor's loop (under 2 minutes on 2 cores): every test not marked slow (tests/conftest.py
# says which are: the chapters' notebooks, the browser's book, Flower on Ray and in deployment,
# sweeps and sessions that start worker processes, the runs of every algorithm under the device
# check). `make test` runs them all, as CI does.
test-fast: data
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile tests -m "not slow" -p no:cacheprovider --durations=10; status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests"; fi; exit $$status

# Writes benchmarks/results/<benchmark>-<machine>.json, which the book's Performance page shows.
benchmark: data
	$(BIN)/python benchmarks/local_training.py --samples 1024
	$(BIN)/python benchmarks/fedavg_round.py
	$(BIN)/python benchmarks/mixture_threads.py

clean:
	rm -rf book/_build book/chapters
