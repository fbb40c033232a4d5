# build-support/qt.mk — the Qt 6 API (libportal-keyring-qt6.so: PortalKeyring::QtAuth, QtPortal),
# included by the Makefile. Built only where pkg-config finds Qt6Core; elsewhere `make qt` says so.
#
#   make qt            build/qt/: the library (moc run here), linked against PORTAL_KEYRING_LIBDIR's
#                      libportal-keyring.so with that directory as rpath (the build tree's copy)
#   make install-qt    $(LIBDIR)/libportal-keyring-qt6.so.0 (+ .so), relinked against build/make/lib
#                      without rpath; $(INCLUDEDIR)/portal-keyring-qt6/*.h; and the CMake package
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
$(QT_OUT)/$(QT_SONAME): $(QT_SOURCES) $(QT_MOC_SOURCES) $(QT_HEADERS) $(wildcard Sources/PortalKeyringQt/*.h) \
		$(QT_OUT)/$(QT_NAME).map build-support/qt.mk
	$(QT_LINK)
	ln -sfn $(QT_SONAME) $(QT_OUT)/$(QT_LINKNAME)
