# Install layout and Debian packages. `cmake --install BUILD [--prefix P]` puts the daemons in
# P/bin, the systemd units in P/lib/systemd/system (ExecStart rewritten to P/bin), and the
# example configurations in P/share/tern/examples; `cpack -G DEB` (run in BUILD) packages the
# same tree for /usr. Included from the top-level CMakeLists.txt.
include(GNUInstallDirs)

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

install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/coordinator.yaml
              ${PROJECT_SOURCE_DIR}/deploy/config/worker.yaml
              ${PROJECT_SOURCE_DIR}/deploy/config/sim-quick.yaml
              ${PROJECT_SOURCE_DIR}/deploy/config/sim-cat.yaml
              ${PROJECT_SOURCE_DIR}/deploy/packaging/coordinator.env
              ${PROJECT_SOURCE_DIR}/deploy/packaging/worker.env
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tern/examples COMPONENT daemons)
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

set(CPACK_PACKAGE_NAME tern)
set(CPACK_PACKAGE_VENDOR "tern")
set(CPACK_PACKAGE_CONTACT "tern maintainers <tern@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Distributed training with compressed gradients over ZeroMQ (coordinator, worker, simulator)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
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
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, gnuplot-nox")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/packaging/postinst
                                       ${PROJECT_SOURCE_DIR}/deploy/packaging/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_SOURCE_IGNORE_FILES "/build[^/]*/;/out/;/\\\\.git/")
include(CPack)
