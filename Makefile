# Makefile — build, install and check libportal-keyring like a system library.
#
#   make                     release build into build/make/: the self-contained shared library
#                            (Swift runtime linked in), portal-keyring.pc, portal-session
#   make install             install under $(DESTDIR)$(PREFIX) (PREFIX=/usr/local by default): the
#                            C library, its headers and .pc, portal-session, the Python package,
#                            and the GNOME API (install-gobject)
#   make install-gobject     only the GNOME API, as libsecret lays its files out:
#                            $(LIBDIR)/libportal-keyring-gobject-1.so.0 (+ .so), relinked without
#                            the build tree's rpath (it finds libportal-keyring.so.0 in $(LIBDIR));
#                            $(INCLUDEDIR)/portal-keyring-gobject-1/portal-keyring-gobject/*.h;
#                            $(PKGCONFIGDIR)/portal-keyring-gobject-1.pc; $(GIRDIR)/PortalKeyring-1.gir;
#                            $(TYPELIBDIR)/PortalKeyring-1.typelib; $(VAPIDIR)/portal-keyring-gobject-1
#                            .vapi and .deps. Needs `make` first (it links against build/make/lib).
#   make install-examples    also install the examples' desktop files (portal-example:// handler)
#   make uninstall           remove what `make install` and `make install-examples` install
#                            (uninstall-gobject: only the GNOME API's files)
#   make check-install       Tests/install/run.sh: install into a temporary prefix, compile and run
#                            a C program with only pkg-config, symbol / version / ABI / ldd checks
#   make abi                 dump the C ABI (abidw) to build/make/abi/portal-keyring.abi
#   make abi-check           compare it with the committed baseline abi/portal-keyring.abi
#   make abi-baseline        regenerate the baseline (refuses an incompatible change unless the
#                            soname major was bumped; docs/ABI.md)
#   make clean               remove build/make, build/gobject and the release scratch directory
#   make gobject             the GNOME API (GObject over the C ABI) into build/gobject/:
#                            libportal-keyring-gobject-1.so, PortalKeyring-1.gir and .typelib
#                            (g-ir-scanner --warn-all: any warning fails), the .vapi (vapigen)
#   make gobject-doc         its gi-docgen reference into build/gobject/doc/
#   make check-gobject       Tests/gobject/run.sh (inside scripts/with-keyring.sh
#                            scripts/with-portal-api.sh)
#   make qt                  the Qt 6 API (build-support/qt.mk) into build/qt/: libportal-keyring-qt6.so
#                            (moc run here); only where pkg-config finds Qt6Core
#   make install-qt          it, its headers and the CMake package (find_package(PortalKeyring))
#   make mutants             mutation testing (Tests/mutants/run.sh): every catalogued mutant
#                            must be killed by its guarding suites; MUTANTS_ARGS="--only NAME"
#
# Variables: PREFIX DESTDIR BINDIR LIBDIR INCLUDEDIR DATADIR PKGCONFIGDIR APPLICATIONSDIR
# GIRDIR (DATADIR/gir-1.0) TYPELIBDIR (LIBDIR/girepository-1.0: with a multiarch LIBDIR, Debian's
# /usr/lib/<triplet>/girepository-1.0) VAPIDIR (DATADIR/vala/vapi) PYTHON PYTHONDIR,
# SWIFT (default: swift on PATH, else /opt/swift/usr/bin/swift), SWIFT_LINKER (lld; empty = the
# toolchain default, gold), STRIP (strip; STRIP= installs unstripped files), CC, LDCONFIG,
# PORTAL_KEYRING_LIBDIR (the libportal-keyring.so the GNOME API's build-tree copy links against;
# default .build/debug, SwiftPM's debug build, when it exists, else build/make/lib).
# A non-standard PREFIX is handled the same for both libraries: no rpath in anything installed;
# ldconfig runs only for a real install as root into a directory ld.so searches, so elsewhere the
# programs find $(LIBDIR) through LD_LIBRARY_PATH, and GI_TYPELIB_PATH=$(TYPELIBDIR) for bindings.
#
# Everything ABI-related is derived from Include/portal_keyring.h at build time: the version
# (PORTAL_KEYRING_VERSION_MAJOR/MINOR/PATCH -> libportal-keyring.so.MAJOR.MINOR.PATCH, soname
# libportal-keyring.so.MAJOR) and the export list (every PORTAL_API function -> version script).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
# One SwiftPM build at a time (lib and bin share the scratch directory and its lock).
.NOTPARALLEL:

PREFIX ?= /usr/local
EXEC_PREFIX ?= $(PREFIX)
BINDIR ?= $(EXEC_PREFIX)/bin
LIBDIR ?= $(EXEC_PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
APPLICATIONSDIR ?= $(DATADIR)/applications
GIRDIR ?= $(DATADIR)/gir-1.0
TYPELIBDIR ?= $(LIBDIR)/girepository-1.0
VAPIDIR ?= $(DATADIR)/vala/vapi
# The system Python (Debian: /usr/bin/python3), whose sys.path decides where the module goes.
# In a virtual environment, its Python (so that `make install PREFIX=$VIRTUAL_ENV` installs for it).
PYTHON ?= $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python3,$(firstword $(wildcard /usr/bin/python3) python3))
# Empty: computed by build-support/python-dir.py for PREFIX at install time.
PYTHONDIR ?=
DESTDIR ?=

SWIFT ?= $(or $(shell command -v swift 2>/dev/null),/opt/swift/usr/bin/swift)
SWIFT_LINKER ?= lld
CC ?= cc
STRIP ?= strip
INSTALL ?= install
LDCONFIG ?= ldconfig

OUT := build/make
SCRATCH := .build/make
SWIFT_BIN = $(SCRATCH)/release
HEADER := Include/portal_keyring.h
HEADERS := $(wildcard Include/*.h Include/*.hpp)
# The Python package (python/portal_keyring): installed as files, so no pip and no network.
PYTHON_PACKAGE := $(wildcard python/portal_keyring/__init__.py)
PYTHON_FILES := $(wildcard python/portal_keyring/*.py) python/portal_keyring/py.typed
DESKTOP_FILES := $(wildcard examples/desktop/*.desktop)

VERSION_INFO := $(shell build-support/header-api.sh version $(HEADER))
ifneq ($(words $(VERSION_INFO)),5)
$(error cannot read the PORTAL_KEYRING_VERSION_* macros from $(HEADER))
endif
MAJOR := $(word 1,$(VERSION_INFO))
MINOR := $(word 2,$(VERSION_INFO))
PATCH := $(word 3,$(VERSION_INFO))
VERSION := $(MAJOR).$(MINOR).$(PATCH)
LINKNAME := libportal-keyring.so
SONAME := $(LINKNAME).$(MAJOR)
REALNAME := $(LINKNAME).$(VERSION)

# -static-stdlib: the Swift runtime, Dispatch and FoundationEssentials are linked into the .so
# (the toolchain adds --exclude-libs ALL); the version script then exports only the header's
# functions, so the runtime stays private. lld (shipped with the toolchain) rather than the
# default gold: slightly smaller, and no stray local entries in .dynsym. -z defs: no undefined
# symbols; with lld a header function that Swift does not implement fails the link.
# --gc-sections is kept although it removes almost nothing today: Swift's metadata sections
# reference every function, and the runtime archives are not built with -ffunction-sections.
# --disable-local-rpath: no RUNPATH $ORIGIN in the installed library or command. The library
# dlopen()s libcurl.so.4 by soname, and a RUNPATH would make the loader look next to the library
# first: a libcurl.so.4 placed there would run its code in every host process (docs/security.md).
# Everything the library needs comes from the system library path (ld.so.conf, ld.so.cache).
# SWIFT_OPTIMIZE: the Swift optimization mode of the release build (-O, SwiftPM's default for
# -c release, when empty; e.g. -Osize). bench/results.md's history has the figures of each.
SWIFT_OPTIMIZE ?=
# -function-sections: each of our functions in a section of its own, so that the linker can lay
# them out (LAYOUT_FLAGS below) and --gc-sections can drop the unused ones.
SWIFT_FLAGS := -c release --scratch-path $(SCRATCH) --disable-local-rpath -Xswiftc -static-stdlib \
	-Xswiftc -Xfrontend -Xswiftc -function-sections \
	$(if $(SWIFT_LINKER),-Xswiftc -use-ld=$(SWIFT_LINKER)) $(if $(SWIFT_OPTIMIZE),-Xswiftc $(SWIFT_OPTIMIZE))
# Link-time tuning (bench/results.md), shared by the library, portal-session and bench's floor library
# (bench/build-floor.sh reads it with `make -s print-floor-link-flags`); each flag's figures are
# in bench/results.md's history. -z pack-relative-relocs: the ~36,000 relative relocations go
# into a packed .relr.dyn (6 KiB) instead of .rela.dyn (843 KiB), which the loader read at every
# dlopen: -0.86 MB on disk, -1.0 MiB peak RSS. It needs glibc >= 2.36 (the library then
# requires the GLIBC_ABI_DT_RELR version, so an older loader refuses it with a clear error
# instead of misrelocating); Debian 12 has 2.36. Tried and not kept (no gain, or a risk for
# no gain): --icf=safe, --icf=all, -Osize (SWIFT_OPTIMIZE); -O1 and --hash-style=gnu are lld's
# defaults already, and the library binds lazily already.
# Only where the build machine's glibc has DT_RELR (2.36+): on an older one the flag would make a
# library its own loader refuses.
RELR_GLIBC := $(shell getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ split($$2, v, "."); print (v[1] > 2 || (v[1] == 2 && v[2] >= 36)) ? "yes" : "" }')
# Layout (lld only): the functions that loading the library and the first restore run
# (build-support/hot-symbols.txt, written by bench/hot-symbols.sh) placed together at the start of
# .text. The kernel maps code in 64 KiB windows around each touched page: scattered over the
# library's text, the first restore made about 3.5 MiB of it resident (bench/results.md).
HOT_SYMBOLS := $(CURDIR)/build-support/hot-symbols.txt
LAYOUT_FLAGS := $(if $(filter lld,$(SWIFT_LINKER)),-Xlinker --symbol-ordering-file=$(HOT_SYMBOLS) \
	-Xlinker --no-warn-symbol-ordering)
# -z max-page-size=65536: segments aligned to 64 KiB, so that the loader places the library at a
# 64 KiB boundary and the kernel's windows line up with the layout (-0.1 to -0.2 MiB resident).
LAYOUT_FLAGS += $(if $(filter lld,$(SWIFT_LINKER)),-Xlinker -z -Xlinker max-page-size=65536)
LINK_TUNING := $(if $(RELR_GLIBC),-Xlinker -z -Xlinker pack-relative-relocs) $(LAYOUT_FLAGS)
LIB_LINK_FLAGS := $(LINK_TUNING) -Xlinker --version-script=$(CURDIR)/$(OUT)/portal-keyring.map \
	-Xlinker -soname=$(SONAME) -Xlinker --gc-sections -Xlinker -z -Xlinker defs
BIN_LINK_FLAGS := $(LINK_TUNING) -Xlinker --gc-sections

.PHONY: all lib pc bin install install-examples uninstall check-install abi abi-check abi-baseline clean FORCE

all: lib pc bin

# ------------------------------------------------------------------------------------- build

# The version script, regenerated from the header on every run; when it changes, the linked
# library is deleted so that SwiftPM relinks it (the -Xlinker flag itself does not change).
$(OUT)/portal-keyring.map: FORCE
	@mkdir -p $(@D)
	@build-support/header-api.sh version-script $(HEADER) >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; rm -f $(SWIFT_BIN)/$(LINKNAME); fi

# The symbol-ordering file is a link input SwiftPM does not track either: a newer one deletes the
# linked library and portal-session, so that they are laid out by it.
$(OUT)/hot-symbols.stamp: $(HOT_SYMBOLS)
	@mkdir -p $(@D)
	@rm -f $(SWIFT_BIN)/$(LINKNAME) $(SWIFT_BIN)/portal-session
	@touch $@

lib: $(OUT)/portal-keyring.map $(OUT)/hot-symbols.stamp
	$(SWIFT) build $(SWIFT_FLAGS) --product portal-keyring $(LIB_LINK_FLAGS)
	@mkdir -p $(OUT)/lib
	@rm -f $(OUT)/lib/$(LINKNAME)*
	@if [[ -n "$(STRIP)" ]]; then \
		$(STRIP) --strip-unneeded -o $(OUT)/lib/$(REALNAME) $(SWIFT_BIN)/$(LINKNAME); \
	else \
		cp $(SWIFT_BIN)/$(LINKNAME) $(OUT)/lib/$(REALNAME); \
	fi
	@ln -sfn $(REALNAME) $(OUT)/lib/$(SONAME)
	@ln -sfn $(SONAME) $(OUT)/lib/$(LINKNAME)
	@printf 'built %s (%s bytes, soname %s)\n' "$(OUT)/lib/$(REALNAME)" \
		"$$(stat -c %s $(OUT)/lib/$(REALNAME))" "$(SONAME)"

# The .pc files (the C library's and the GNOME API's) for the current PREFIX/LIBDIR/INCLUDEDIR
# (regenerated every run, so that `make install PREFIX=...` after `make` gets the right paths).
PC_NAMES = portal-keyring $(GOBJECT_NAME)
pc:
	@mkdir -p $(OUT)
	@p='$(PREFIX)'; ep='$(EXEC_PREFIX)'; exec_prefix=$$ep; libdir='$(LIBDIR)'; includedir='$(INCLUDEDIR)'; \
	[[ $$exec_prefix == "$$p" ]] && exec_prefix='$${prefix}'; \
	[[ $$libdir == "$$ep"/* ]] && libdir="\$${exec_prefix}$${libdir#"$$ep"}"; \
	[[ $$includedir == "$$p"/* ]] && includedir="\$${prefix}$${includedir#"$$p"}"; \
	for name in $(PC_NAMES); do \
		sed -e "s|@prefix@|$$p|" -e "s|@exec_prefix@|$$exec_prefix|" -e "s|@libdir@|$$libdir|" \
			-e "s|@includedir@|$$includedir|" -e "s|@version@|$(VERSION)|" \
			build-support/$$name.pc.in >$(OUT)/$$name.pc; \
	done

# portal-session, when the package has that product (skipped with a notice otherwise).
bin: $(OUT)/hot-symbols.stamp
	@if build-support/has-product.sh $(SWIFT) $(SCRATCH) portal-session; then \
		echo "$(SWIFT) build $(SWIFT_FLAGS) --product portal-session $(BIN_LINK_FLAGS)"; \
		$(SWIFT) build $(SWIFT_FLAGS) --product portal-session $(BIN_LINK_FLAGS); \
		mkdir -p $(OUT)/bin; \
		if [[ -n "$(STRIP)" ]]; then \
			$(STRIP) -o $(OUT)/bin/portal-session $(SWIFT_BIN)/portal-session; \
		else \
			cp $(SWIFT_BIN)/portal-session $(OUT)/bin/portal-session; \
		fi; \
	else \
		rm -f $(OUT)/bin/portal-session; \
		echo "notice: Package.swift has no portal-session product; not building it"; \
	fi

# ----------------------------------------------------------------------------------- install

D = $(DESTDIR)
# Where the Python package goes (only used when python/portal_keyring exists).
pythondir = $(or $(PYTHONDIR),$(shell $(PYTHON) build-support/python-dir.py $(PREFIX)))

install: all install-gobject install-qt
	$(INSTALL) -d $(D)$(LIBDIR) $(D)$(INCLUDEDIR) $(D)$(PKGCONFIGDIR)
	$(INSTALL) -m 0755 $(OUT)/lib/$(REALNAME) $(D)$(LIBDIR)/$(REALNAME)
	ln -sfn $(REALNAME) $(D)$(LIBDIR)/$(SONAME)
	ln -sfn $(SONAME) $(D)$(LIBDIR)/$(LINKNAME)
	$(INSTALL) -m 0644 $(HEADERS) $(D)$(INCLUDEDIR)/
	$(INSTALL) -m 0644 $(OUT)/portal-keyring.pc $(D)$(PKGCONFIGDIR)/portal-keyring.pc
	@if [[ -f $(OUT)/bin/portal-session ]]; then \
		echo "$(INSTALL) -m 0755 $(OUT)/bin/portal-session $(D)$(BINDIR)/portal-session"; \
		$(INSTALL) -d $(D)$(BINDIR); \
		$(INSTALL) -m 0755 $(OUT)/bin/portal-session $(D)$(BINDIR)/portal-session; \
	else \
		echo "notice: portal-session was not built; not installing it"; \
	fi
ifneq ($(PYTHON_PACKAGE),)
	$(INSTALL) -d $(D)$(pythondir)/portal_keyring
	$(INSTALL) -m 0644 $(PYTHON_FILES) $(D)$(pythondir)/portal_keyring/
else
	@echo "notice: no python/portal_keyring; not installing the Python package"
endif
	@$(ldconfig_if_system)

# The examples' desktop files (the portal-example:// URL handler) only on request: installed
# system-wide they would claim a URL scheme for every user.
install-examples:
ifneq ($(DESKTOP_FILES),)
	$(INSTALL) -d $(D)$(APPLICATIONSDIR)
	$(INSTALL) -m 0644 $(DESKTOP_FILES) $(D)$(APPLICATIONSDIR)/
endif

uninstall: uninstall-gobject uninstall-qt
	rm -f $(D)$(LIBDIR)/$(LINKNAME) $(D)$(LIBDIR)/$(SONAME) $(D)$(LIBDIR)/$(REALNAME)
	rm -f $(addprefix $(D)$(INCLUDEDIR)/,$(notdir $(HEADERS)))
	rm -f $(D)$(PKGCONFIGDIR)/portal-keyring.pc
	rm -f $(D)$(BINDIR)/portal-session
ifneq ($(PYTHON_PACKAGE),)
	rm -f $(addprefix $(D)$(pythondir)/portal_keyring/,$(notdir $(PYTHON_FILES)))
	rm -rf $(D)$(pythondir)/portal_keyring/__pycache__
	-rmdir $(D)$(pythondir)/portal_keyring 2>/dev/null
endif
ifneq ($(DESKTOP_FILES),)
	rm -f $(addprefix $(D)$(APPLICATIONSDIR)/,$(notdir $(DESKTOP_FILES)))
endif
	@$(ldconfig_if_system)

# Refresh the loader cache after a real (not staged) install into a directory ld.so searches.
define ldconfig_if_system
if [[ -z "$(DESTDIR)" && $$(id -u) == 0 ]] && command -v $(LDCONFIG) >/dev/null && \
	$(LDCONFIG) -N -X -v 2>/dev/null | grep -q '^$(LIBDIR):'; then \
	echo "$(LDCONFIG)"; $(LDCONFIG); \
fi
endef

check-install:
	Tests/install/run.sh

# ------------------------------------------------------------------------------------- ABI

# The ABI probe: every header function with a stub body, compiled with -g and linked with the
# same version script and soname, so abidw records the C types (the Swift library carries no C
# debug info for its exports; Tests/install/run.sh checks that it exports the same symbols).
abi: $(OUT)/portal-keyring.map
	@mkdir -p $(OUT)/abi
	build-support/header-api.sh probe $(HEADER) >$(OUT)/abi/probe.c
	$(CC) -std=gnu2x -g -O0 -fPIC -shared -Wall -Werror -IInclude -o $(OUT)/abi/$(SONAME) \
		$(OUT)/abi/probe.c -Wl,-soname,$(SONAME) -Wl,--version-script=$(OUT)/portal-keyring.map
	abidw --headers-dir Include --no-corpus-path --no-comp-dir-path --no-show-locs \
		--out-file $(OUT)/abi/portal-keyring.abi $(OUT)/abi/$(SONAME)

abi-check: abi
	build-support/abi.sh check abi/portal-keyring.abi $(OUT)/abi/portal-keyring.abi

abi-baseline: abi
	build-support/abi.sh update abi/portal-keyring.abi $(OUT)/abi/portal-keyring.abi

clean:
	rm -rf $(OUT) $(SCRATCH) $(GOBJECT_OUT)

FORCE:

# Mutation testing (Tests/mutants/README.md): a scratch copy of the tree, one mutant at a time; never touches
# the working tree. Tests/mutants/README.md.
.PHONY: mutants
mutants:
	Tests/mutants/run.sh $(MUTANTS_ARGS)

# Benchmarks (bench/results.md): the shipped build vs raw libsecret, secret-tool and PyPI keyring on a
# private keyring; prints the table and writes bench/results.md. Never fails on timings.
.PHONY: bench bench-smoke print-floor-link-flags
print-floor-link-flags:
	@echo '$(LINK_TUNING)'

bench: lib bin
	bench/run.sh

bench-smoke: lib bin
	bench/run.sh --smoke

# ---------------------------------------------------------------------------- the GNOME API
#
# A library of its own, libportal-keyring-gobject-1.so (the "-1" is the API version, as in
# libsecret-1 and PortalKeyring-1, so that a later -2 installs beside it), linked against the C
# library: C users of libportal-keyring.so load none of GObject's type machinery, so its size,
# load time and resident memory stay where `make bench` measures them. Exports only
# portal_keyring_* (a version script), so the C library's portal_* names and the layer's
# helpers stay out of its ABI. Built against the library of PORTAL_KEYRING_LIBDIR, with an
# rpath to it so that the tests and the introspection dumper find it uninstalled; `make install`
# installs a copy relinked without it (install-gobject below).
PORTAL_KEYRING_LIBDIR ?= $(CURDIR)/$(if $(wildcard .build/debug/$(LINKNAME)),.build/debug,$(OUT)/lib)
GOBJECT_OUT := build/gobject
GOBJECT_API := 1
GOBJECT_NAME := portal-keyring-gobject-$(GOBJECT_API)
GOBJECT_LINKNAME := lib$(GOBJECT_NAME).so
GOBJECT_SONAME := $(GOBJECT_LINKNAME).0
GIR_NAME := PortalKeyring-$(GOBJECT_API)
GOBJECT_SOURCES := $(wildcard Sources/PortalKeyringGObject/*.c)
GOBJECT_PRIVATE_HEADERS := $(wildcard Sources/PortalKeyringGObject/*.h)
GOBJECT_HEADERS := $(wildcard Include/portal-keyring-gobject/*.h)
GOBJECT_CFLAGS := -std=gnu11 -g -O2 -fPIC -Wall -Wextra -Werror -Wmissing-prototypes \
	-DPORTAL_KEYRING_GOBJECT_COMPILATION -DG_LOG_DOMAIN='"PortalKeyring"' \
	-DGLIB_VERSION_MIN_REQUIRED=GLIB_VERSION_2_74 -IInclude $(shell pkg-config --cflags gio-2.0)
GIO_LIBS := $(shell pkg-config --libs gio-2.0)
# Links the layer into $@; each library target says which libportal-keyring.so in GOBJECT_C_LIB.
GOBJECT_LINK = $(CC) $(GOBJECT_CFLAGS) -shared -o $@ $(GOBJECT_SOURCES) -Wl,-soname,$(GOBJECT_SONAME) \
	-Wl,--version-script=$(GOBJECT_OUT)/$(GOBJECT_NAME).map -Wl,-z,defs -Wl,--as-needed $(GIO_LIBS) $(GOBJECT_C_LIB)

.PHONY: gobject gobject-lib gir vapi check-gobject

gobject: gobject-lib gir vapi

gobject-lib: $(GOBJECT_OUT)/$(GOBJECT_SONAME)

$(GOBJECT_OUT)/$(GOBJECT_NAME).map:
	@mkdir -p $(@D)
	@printf '{\n  global: portal_keyring_*;\n  local: *;\n};\n' >$@

# The version script, not -fvisibility=hidden, decides the exports: G_DECLARE_FINAL_TYPE's
# get_type() declarations carry no visibility attribute, and the shared helpers
# (_portal_keyring_*) do not match portal_keyring_*.
$(GOBJECT_OUT)/$(GOBJECT_SONAME): GOBJECT_C_LIB = -L$(PORTAL_KEYRING_LIBDIR) -lportal-keyring \
	-Wl,-rpath,$(PORTAL_KEYRING_LIBDIR)
$(GOBJECT_OUT)/$(GOBJECT_SONAME): $(GOBJECT_SOURCES) $(GOBJECT_HEADERS) $(GOBJECT_PRIVATE_HEADERS) $(HEADER) \
		$(GOBJECT_OUT)/$(GOBJECT_NAME).map Makefile
	@[[ -f $(PORTAL_KEYRING_LIBDIR)/libportal-keyring.so ]] || \
		{ echo "$(PORTAL_KEYRING_LIBDIR)/libportal-keyring.so not found (swift build, or PORTAL_KEYRING_LIBDIR=DIR)" >&2; exit 2; }
	$(GOBJECT_LINK)
	ln -sfn $(GOBJECT_SONAME) $(GOBJECT_OUT)/$(GOBJECT_LINKNAME)

# The introspection data. --warn-all with --warn-error, and the output searched for warnings
# too: an unannotated parameter fails the build here, not in a binding later; then
# `gi-docgen check --fatal-warnings` fails it on a public symbol without documentation. The dumper (a program g-ir-scanner links against the library to read the
# registered types) finds both libraries through the library's rpath and --library-path.
GIR_SCANNER ?= g-ir-scanner
GIR_COMPILER ?= g-ir-compiler
VAPIGEN ?= vapigen
GI_DOCGEN ?= gi-docgen

gir: $(GOBJECT_OUT)/$(GIR_NAME).typelib

$(GOBJECT_OUT)/$(GIR_NAME).gir: $(GOBJECT_OUT)/$(GOBJECT_SONAME) $(GOBJECT_SOURCES) $(GOBJECT_HEADERS)
	LD_LIBRARY_PATH=$(CURDIR)/$(GOBJECT_OUT):$(PORTAL_KEYRING_LIBDIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
	$(GIR_SCANNER) --quiet --warn-all --warn-error --namespace=PortalKeyring --nsversion=$(GOBJECT_API) \
		--identifier-prefix=PortalKeyring --symbol-prefix=portal_keyring --include=GObject-2.0 --include=Gio-2.0 \
		--pkg=gio-2.0 --pkg-export=$(GOBJECT_NAME) --c-include=portal-keyring-gobject/portal-keyring-gobject.h \
		--library=$(GOBJECT_NAME) --library-path=$(CURDIR)/$(GOBJECT_OUT) --library-path=$(PORTAL_KEYRING_LIBDIR) \
		--sources-top-dirs=$(CURDIR) --cflags-begin -IInclude -DPORTAL_KEYRING_GOBJECT_COMPILATION --cflags-end \
		--output=$@ $(GOBJECT_HEADERS) $(GOBJECT_SOURCES) 2>$@.log || { cat $@.log >&2; exit 1; }
	@if grep -q . $@.log; then cat $@.log >&2; echo "g-ir-scanner warned: $@ not kept" >&2; rm -f $@; exit 1; fi
	@# The scanner does not mind a symbol without documentation; gi-docgen's check does.
	$(GI_DOCGEN) check --fatal-warnings $@ >$@.check.log 2>&1 || { grep -v INFO $@.check.log >&2; rm -f $@; exit 1; }

$(GOBJECT_OUT)/$(GIR_NAME).typelib: $(GOBJECT_OUT)/$(GIR_NAME).gir
	$(GIR_COMPILER) --output=$@ $<

# The .vapi is named like the pkg-config module, so that `valac --pkg portal-keyring-gobject-1`
# finds it; its .deps names gio-2.0, which the API's signatures use.
vapi: $(GOBJECT_OUT)/$(GOBJECT_NAME).vapi

$(GOBJECT_OUT)/$(GOBJECT_NAME).vapi: $(GOBJECT_OUT)/$(GIR_NAME).gir Sources/PortalKeyringGObject/$(GIR_NAME).metadata
	$(VAPIGEN) --library=$(GOBJECT_NAME) --pkg=gio-2.0 --metadatadir=Sources/PortalKeyringGObject \
		--directory=$(GOBJECT_OUT) $<
	printf 'gio-2.0\n' >$(GOBJECT_OUT)/$(GOBJECT_NAME).deps

# A pkg-config file for the uninstalled build (build/gobject on PKG_CONFIG_PATH), so that the
# tests compile a Vala or C program exactly as an app does with `--pkg` / `pkg-config`.
gobject: $(GOBJECT_OUT)/pkgconfig/$(GOBJECT_NAME).pc

$(GOBJECT_OUT)/pkgconfig/$(GOBJECT_NAME).pc: Makefile
	@mkdir -p $(@D)
	@printf '%s\n' 'Name: $(GOBJECT_NAME)' 'Description: portal-keyring GNOME API (uninstalled build)' \
		'Version: $(VERSION)' 'Requires: gio-2.0' 'Cflags: -I$(CURDIR)/Include' \
		'Libs: -L$(CURDIR)/$(GOBJECT_OUT) -l$(GOBJECT_NAME) -Wl,-rpath,$(CURDIR)/$(GOBJECT_OUT)' >$@

# The reference, as GNOME libraries publish theirs: gi-docgen HTML from the .gir, into
# build/gobject/doc/ (open index.html).
.PHONY: gobject-doc
gobject-doc: $(GOBJECT_OUT)/doc/index.html

$(GOBJECT_OUT)/doc/index.html: $(GOBJECT_OUT)/$(GIR_NAME).gir Sources/PortalKeyringGObject/$(GIR_NAME).toml
	sed 's/@VERSION@/$(VERSION)/' Sources/PortalKeyringGObject/$(GIR_NAME).toml >$(GOBJECT_OUT)/$(GIR_NAME).toml
	rm -rf $(GOBJECT_OUT)/doc
	$(GI_DOCGEN) generate --quiet --fatal-warnings --no-namespace-dir --config=$(GOBJECT_OUT)/$(GIR_NAME).toml \
		--output-dir=$(GOBJECT_OUT)/doc $<

check-gobject: gobject
	Tests/gobject/run.sh

# Installing it. The library is relinked for the install against the C library `make` built
# (build/make/lib: its DT_NEEDED is then the soname libportal-keyring.so.0) and with no rpath,
# the C library's rule: both are found in $(LIBDIR) through ld.so's path (ldconfig_if_system)
# or LD_LIBRARY_PATH. The .gir's shared-library is the soname, so the installed typelib loads
# it; the .gir, typelib and .vapi are the build's own, which name no path.
.PHONY: install-gobject uninstall-gobject
GOBJECT_INSTALLED_LIB := $(GOBJECT_OUT)/install/$(GOBJECT_SONAME)
GOBJECT_INCLUDEDIR = $(INCLUDEDIR)/$(GOBJECT_NAME)

$(GOBJECT_INSTALLED_LIB): GOBJECT_C_LIB = -L$(OUT)/lib -lportal-keyring
$(GOBJECT_INSTALLED_LIB): $(GOBJECT_SOURCES) $(GOBJECT_HEADERS) $(GOBJECT_PRIVATE_HEADERS) $(HEADER) \
		$(GOBJECT_OUT)/$(GOBJECT_NAME).map Makefile $(wildcard $(OUT)/lib/$(REALNAME))
	@[[ -f $(OUT)/lib/$(LINKNAME) ]] || { echo "$(OUT)/lib/$(LINKNAME) not found: run make first" >&2; exit 2; }
	@mkdir -p $(@D)
	$(GOBJECT_LINK)
	@if [[ -n "$(STRIP)" ]]; then $(STRIP) --strip-unneeded $@; fi

install-gobject: gobject pc $(GOBJECT_INSTALLED_LIB)
	$(INSTALL) -d $(D)$(LIBDIR) $(D)$(GOBJECT_INCLUDEDIR)/portal-keyring-gobject $(D)$(PKGCONFIGDIR) \
		$(D)$(GIRDIR) $(D)$(TYPELIBDIR) $(D)$(VAPIDIR)
	$(INSTALL) -m 0755 $(GOBJECT_INSTALLED_LIB) $(D)$(LIBDIR)/$(GOBJECT_SONAME)
	ln -sfn $(GOBJECT_SONAME) $(D)$(LIBDIR)/$(GOBJECT_LINKNAME)
	$(INSTALL) -m 0644 $(GOBJECT_HEADERS) $(D)$(GOBJECT_INCLUDEDIR)/portal-keyring-gobject/
	$(INSTALL) -m 0644 $(OUT)/$(GOBJECT_NAME).pc $(D)$(PKGCONFIGDIR)/
	$(INSTALL) -m 0644 $(GOBJECT_OUT)/$(GIR_NAME).gir $(D)$(GIRDIR)/
	$(INSTALL) -m 0644 $(GOBJECT_OUT)/$(GIR_NAME).typelib $(D)$(TYPELIBDIR)/
	$(INSTALL) -m 0644 $(GOBJECT_OUT)/$(GOBJECT_NAME).vapi $(GOBJECT_OUT)/$(GOBJECT_NAME).deps $(D)$(VAPIDIR)/
	@$(ldconfig_if_system)

uninstall-gobject:
	rm -f $(D)$(LIBDIR)/$(GOBJECT_LINKNAME) $(D)$(LIBDIR)/$(GOBJECT_SONAME)
	rm -f $(addprefix $(D)$(GOBJECT_INCLUDEDIR)/portal-keyring-gobject/,$(notdir $(GOBJECT_HEADERS)))
	-rmdir $(D)$(GOBJECT_INCLUDEDIR)/portal-keyring-gobject $(D)$(GOBJECT_INCLUDEDIR) 2>/dev/null
	rm -f $(D)$(PKGCONFIGDIR)/$(GOBJECT_NAME).pc $(D)$(GIRDIR)/$(GIR_NAME).gir $(D)$(TYPELIBDIR)/$(GIR_NAME).typelib
	rm -f $(D)$(VAPIDIR)/$(GOBJECT_NAME).vapi $(D)$(VAPIDIR)/$(GOBJECT_NAME).deps
	@$(ldconfig_if_system)

# ------------------------------------------------------------------------------------- Qt 6
include build-support/qt.mk
