# Install layout and Debian packages. `cmake --install BUILD [--prefix P]` puts the daemons in
# P/bin, the systemd units in P/lib/systemd/system (ExecStart rewritten to P/bin), the
# configurations in P/etc/tern (/etc/tern for P = /usr), the examples in P/share/tern/examples and
# the man pages in P/share/man; `cpack -G DEB` (run in BUILD) packages the same tree for /usr.
# Included from the top-level CMakeLists.txt; deploy/packaging/README.md says what lintian thinks.
include(GNUInstallDirs)

# The package's maintainer (control file, changelog, copyright, man pages) and copyright line.
set(TERN_PACKAGE_MAINTAINER "tern developers <tern-dev@lists.tern-project.org>")
set(TERN_COPYRIGHT "2026 The tern authors")
# The Debian revision: 1 for the first package of each upstream version (PROJECT_VERSION).
set(TERN_PACKAGE_REVISION 1)
set(pkg_src ${PROJECT_SOURCE_DIR}/deploy/packaging)
set(pkg_out ${PROJECT_BINARY_DIR}/packaging)

# Packaging installs what is built (build first: `cmake --build BUILD`) instead of building every
# target first: on a Pi or a shared CI box, `cpack` must not start compiling all test suites.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# The units in deploy/systemd name /usr/bin (the packaged layout); the rewrite runs at install
# time so that --prefix given to `cmake --install` (and CPack's staging prefix) is honoured.
foreach(unit tern-coordinator.service tern-worker@.service)
  set(src ${PROJECT_SOURCE_DIR}/deploy/systemd/${unit})
  install(CODE "
    file(READ \"${src}\" unit_text)
    string(REPLACE \"/usr/bin/tern-\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/tern-\"
           unit_text \"\${unit_text}\")
    set(unit_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
    message(STATUS \"Installing: \${unit_dir}/${unit}\")
    file(MAKE_DIRECTORY \"\${unit_dir}\")
    file(WRITE \"\${unit_dir}/${unit}\" \"\${unit_text}\")
  " COMPONENT daemons)
endforeach()

# The configurations the units read, as conffiles: dpkg keeps an administrator's edits across
# upgrades. A prefix other than /usr keeps them under it, as GNUInstallDirs would.
set(etc_sources ${PROJECT_SOURCE_DIR}/deploy/config/coordinator.yaml
                ${pkg_src}/coordinator.env
                ${PROJECT_SOURCE_DIR}/deploy/config/worker.yaml
                ${pkg_src}/worker.env)
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(etc_dir /etc/tern)
  else()
    set(etc_dir \"\${CMAKE_INSTALL_PREFIX}/etc/tern\")
  endif()
  # file(INSTALL) puts DESTDIR (CPack's staging directory) in front.
  file(INSTALL DESTINATION \"\${etc_dir}\" TYPE FILE FILES ${etc_sources})
" COMPONENT daemons)
set(conffiles "")
foreach(f IN LISTS etc_sources)
  get_filename_component(name ${f} NAME)
  string(APPEND conffiles "/etc/tern/${name}\n")
endforeach()
file(WRITE ${pkg_out}/conffiles "${conffiles}")

install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/coordinator.yaml
              ${PROJECT_SOURCE_DIR}/deploy/config/worker.yaml
              ${PROJECT_SOURCE_DIR}/deploy/config/sim-quick.yaml
              ${PROJECT_SOURCE_DIR}/deploy/config/sim-cat.yaml
              ${pkg_src}/coordinator.env
              ${pkg_src}/worker.env
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tern/examples COMPONENT daemons)
# The observability kit: the Grafana dashboard, the Prometheus scrape config and alert rules.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/observability/grafana-dashboard.json
              ${PROJECT_SOURCE_DIR}/deploy/observability/prometheus.yml
              ${PROJECT_SOURCE_DIR}/deploy/observability/alerts.yml
              ${PROJECT_SOURCE_DIR}/deploy/observability/alerts_test.yml
              ${PROJECT_SOURCE_DIR}/deploy/observability/README.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tern/observability COMPONENT daemons)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/plot.sh
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tern RENAME tern-plot.sh COMPONENT daemons)
install(FILES ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemons)
# The pages the README and the daemons' messages point an operator to.
install(FILES ${PROJECT_SOURCE_DIR}/docs/getting-started.md
              ${PROJECT_SOURCE_DIR}/docs/deploy.md
              ${PROJECT_SOURCE_DIR}/docs/operations.md
              ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PROJECT_SOURCE_DIR}/docs/reliability.md
              ${PROJECT_SOURCE_DIR}/docs/security.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT daemons)

# Debian's per-package documents: the machine-readable copyright and the changelog (gzip -9n:
# the highest compression, no time stamp), and the lintian overrides with their reasons.
configure_file(${pkg_src}/copyright.in ${pkg_out}/copyright @ONLY)
configure_file(${pkg_src}/changelog.in ${pkg_out}/changelog.Debian @ONLY)
execute_process(COMMAND gzip -9nc ${pkg_out}/changelog.Debian
                OUTPUT_FILE ${pkg_out}/changelog.Debian.gz COMMAND_ERROR_IS_FATAL ANY)
install(FILES ${pkg_out}/copyright ${pkg_out}/changelog.Debian.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemons)
install(FILES ${pkg_src}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
        RENAME tern COMPONENT daemons)
# The changelog's newest entry names the version being packaged.
set(TERN_PACKAGE_VERSION ${PROJECT_VERSION}-${TERN_PACKAGE_REVISION})
file(STRINGS ${pkg_src}/changelog.in changelog_top LIMIT_COUNT 1)
if(NOT changelog_top MATCHES "^tern \\(${TERN_PACKAGE_VERSION}\\) ")
  message(WARNING "deploy/packaging/changelog.in: the newest entry is not for "
                  "${TERN_PACKAGE_VERSION}: add one before packaging")
endif()

include(${pkg_src}/manpages.cmake)

set(CPACK_PACKAGE_NAME tern)
set(CPACK_PACKAGE_VENDOR "tern")
set(CPACK_PACKAGE_CONTACT "${TERN_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "edge-device training with compressed gradients over ZeroMQ")
# Read here: CPack would XML-escape the text of CPACK_PACKAGE_DESCRIPTION_FILE (' as &apos;).
file(READ ${pkg_src}/description CPACK_DEBIAN_PACKAGE_DESCRIPTION)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE ${TERN_PACKAGE_REVISION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# CPack asks dpkg for the architecture, which names the build machine's: a cross build
# (deploy/cross) packages for the machine it compiled for.
if(CMAKE_CROSSCOMPILING AND NOT CPACK_DEBIAN_PACKAGE_ARCHITECTURE)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^arm")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE armhf)
  elseif(CMAKE_SYSTEM_PROCESSOR STREQUAL "x86_64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
  endif()
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Runtime library dependencies (libzmq5, libprotobuf32, libsystemd0, ...) come from the
# binaries themselves, so they follow whatever the build linked.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# procps: /bin/kill, the coordinator unit's ExecReload.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "procps")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, gnuplot-nox")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${pkg_src}/postinst ${pkg_src}/prerm ${pkg_src}/postrm
                                       ${pkg_out}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_SOURCE_IGNORE_FILES "/build[^/]*/;/out/;/\\\\.git/")
include(CPack)
