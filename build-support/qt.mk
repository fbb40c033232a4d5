# build-support/qt.mk — the Qt 6 API (libportal-keyring-qt6.so: PortalKeyring::QtAuth, QtPortal),
# included by the Makefile. Built only where pkg-config finds Qt6Core; elsewhere `make qt` says so.
#
#   make qt            build/qt/: the library (moc run here), linked against PORTAL_KEYRING_LIBDIR's
#                      libportal-keyring.so with that directory as rpath (the build tree's copy)
#   make install-qt    $(LIBDIR)/libportal-keyring-qt6.so.0 (+ .so), relinked against build/make/lib
#                      with RUNPATH $ORIGIN only (below); $(INCLUDEDIR)/portal-keyring-qt6/*.h; and the CMake package
#                      (PortalKeyringConfig.cmake, also for the C library alone) in $(CMAKEDIR)
#
# One shared library rather than sources to copy: the app links PortalKeyring::qt6 and runs no moc
# of ours; the version script exports only PortalKeyring::Qt* (the header-only C++ wrapper's
# templates stay inside).

QT_OUT := build/qt
QT_NAME := portal-keyring-qt6
QT_LINKNAME := lib$(QT_NAME).so
QT_SONAME := $(QT_LINKNAME).0
QT_PRESENT := $(shell pkg-config --exists Qt6Core && echo yes)
QT_MOC := $(shell pkg-config --variable=libexecdir Qt6Core 2>/dev/null)/moc
QT_HEADERS := $(wildcard Include/portal-keyring-qt6/*.h)
QT_SOURCES := $(wildcard Sources/PortalKeyringQt/*.cpp)
QT_MOC_SOURCES := $(patsubst Include/portal-keyring-qt6/%.h,$(QT_OUT)/moc/moc_%.cpp,$(QT_HEADERS))
QT_CXXFLAGS := -std=c++17 -g -O2 -fPIC -Wall -Wextra -Werror -IInclude -IInclude/portal-keyring-qt6 \
	-ISources/PortalKeyringQt $(shell pkg-config --cflags Qt6Core 2>/dev/null)
QT_LIBS := $(shell pkg-config --libs Qt6Core 2>/dev/null)
QT_LINK = $(CXX) $(QT_CXXFLAGS) -shared -o $@ $(QT_SOURCES) $(QT_MOC_SOURCES) -Wl,-soname,$(QT_SONAME) \
	-Wl,--version-script=$(QT_OUT)/$(QT_NAME).map -Wl,-z,defs -Wl,--as-needed $(QT_LIBS) $(QT_C_LIB)
CMAKEDIR ?= $(LIBDIR)/cmake/PortalKeyring

.PHONY: qt install-qt uninstall-qt

ifeq ($(QT_PRESENT),yes)
qt: $(QT_OUT)/$(QT_SONAME)
else
qt:
	@echo "notice: Qt 6 not found (pkg-config Qt6Core; Debian: qt6-base-dev): not building the Qt API"
endif

$(QT_OUT)/moc/moc_%.cpp: Include/portal-keyring-qt6/%.h
	@mkdir -p $(@D)
	$(QT_MOC) $< -o $@

$(QT_OUT)/$(QT_NAME).map: build-support/qt.mk
	@mkdir -p $(@D)
	@printf '{\n  global: extern "C++" { PortalKeyring::Qt*; typeinfo?for?PortalKeyring::Qt*; typeinfo?name?for?PortalKeyring::Qt*; vtable?for?PortalKeyring::Qt*; };\n  local: *;\n};\n' >$@

$(QT_OUT)/$(QT_SONAME): QT_C_LIB = -L$(PORTAL_KEYRING_LIBDIR) -lportal-keyring -Wl,-rpath,$(PORTAL_KEYRING_LIBDIR)
# The C and C++ headers it is written over are inputs too (a change to the C++ API rebuilds it).
$(QT_OUT)/$(QT_SONAME): $(QT_SOURCES) $(QT_MOC_SOURCES) $(QT_HEADERS) $(wildcard Sources/PortalKeyringQt/*.h) \
		$(wildcard Include/portal_keyring*.h Include/portal_keyring*.hpp) $(QT_OUT)/$(QT_NAME).map build-support/qt.mk
	@[[ -f $(PORTAL_KEYRING_LIBDIR)/libportal-keyring.so ]] || \
		{ echo "$(PORTAL_KEYRING_LIBDIR)/libportal-keyring.so not found (swift build, or PORTAL_KEYRING_LIBDIR=DIR)" >&2; exit 2; }
	$(QT_LINK)
	ln -sfn $(QT_SONAME) $(QT_OUT)/$(QT_LINKNAME)

# Installing it: relinked against the C library `make` built (QT_INSTALL_C_LIBDIR), with the one
# search path $ORIGIN (no build-tree path): a CMake consumer finds this library through
# PortalKeyring::qt6's IMPORTED_LOCATION (CMake's default rpath for the program), but a linker with
# --as-needed (Qt's and several distributions' default) drops libportal-keyring.so.0 from a program
# that calls none of its functions, and the program's RUNPATH does not serve this library's own
# needs; $ORIGIN finds it beside this one, in $(LIBDIR), with no LD_LIBRARY_PATH.
QT_INSTALL_C_LIBDIR ?= $(OUT)/lib
QT_INSTALLED_LIB := $(QT_OUT)/install/$(QT_SONAME)

$(QT_INSTALLED_LIB): QT_C_LIB = -L$(QT_INSTALL_C_LIBDIR) -lportal-keyring -Wl,-rpath,'$$ORIGIN'
$(QT_INSTALLED_LIB): $(QT_SOURCES) $(QT_MOC_SOURCES) $(QT_HEADERS) $(wildcard Sources/PortalKeyringQt/*.h) \
		$(QT_OUT)/$(QT_NAME).map build-support/qt.mk
	@mkdir -p $(@D)
	$(QT_LINK)
	@if [[ -n "$(STRIP)" ]]; then $(STRIP) --strip-unneeded $@; fi

ifeq ($(QT_PRESENT),yes)
install-qt: $(QT_INSTALLED_LIB) install-cmake
	$(INSTALL) -d $(D)$(LIBDIR) $(D)$(INCLUDEDIR)/$(QT_NAME)
	$(INSTALL) -m 0755 $(QT_INSTALLED_LIB) $(D)$(LIBDIR)/$(QT_SONAME)
	ln -sfn $(QT_SONAME) $(D)$(LIBDIR)/$(QT_LINKNAME)
	$(INSTALL) -m 0644 $(QT_HEADERS) $(D)$(INCLUDEDIR)/$(QT_NAME)/
	@$(ldconfig_if_system)
else
install-qt: install-cmake
	@echo "notice: Qt 6 not found (pkg-config Qt6Core): not installing the Qt API"
endif

# The CMake package (both targets; PortalKeyring::qt6 only where its library is installed).
.PHONY: install-cmake
install-cmake:
	$(INSTALL) -d $(D)$(CMAKEDIR)
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@MAJOR@|$(MAJOR)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' build-support/PortalKeyringConfig.cmake.in >$(D)$(CMAKEDIR)/PortalKeyringConfig.cmake
	sed -e 's|@VERSION@|$(VERSION)|' build-support/PortalKeyringConfigVersion.cmake.in \
		>$(D)$(CMAKEDIR)/PortalKeyringConfigVersion.cmake

uninstall-qt:
	rm -f $(D)$(LIBDIR)/$(QT_LINKNAME) $(D)$(LIBDIR)/$(QT_SONAME)
	rm -f $(addprefix $(D)$(INCLUDEDIR)/$(QT_NAME)/,$(notdir $(QT_HEADERS)))
	-rmdir $(D)$(INCLUDEDIR)/$(QT_NAME) 2>/dev/null
	rm -f $(D)$(CMAKEDIR)/PortalKeyringConfig.cmake $(D)$(CMAKEDIR)/PortalKeyringConfigVersion.cmake
	-rmdir $(D)$(CMAKEDIR) $(D)$(LIBDIR)/cmake 2>/dev/null
	@$(ldconfig_if_system)
