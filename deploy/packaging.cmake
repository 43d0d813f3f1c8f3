# Install rules for the deploy/ files and the CPack set-up that turns
# `cmake --install` into a Debian package (deploy/build-deb.sh runs it).
# The executables and headers are installed by their parts' CMakeLists.txt.
include(GNUInstallDirs)

# systemd units, with ExecStart pointing at this install's bindir (set by
# CMAKE_INSTALL_PREFIX when configuring, not by `cmake --install --prefix`). They go to
# <prefix>/lib/systemd/system: /usr/lib/systemd/system in the .deb (prefix
# /usr), /usr/local/lib/systemd/system for a local install; systemd reads both.
# The settings file is /etc/default/hmpmd for prefix /usr, else
# <prefix>/etc/default/hmpmd (so a non-root install stays under its prefix).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(hmpmd_default_dir /etc/default)
else()
  set(hmpmd_default_dir ${CMAKE_INSTALL_SYSCONFDIR}/default)
endif()
foreach(unit hmpmd-controller.service hmpmd-worker@.service)
  file(READ ${CMAKE_CURRENT_LIST_DIR}/systemd/${unit} text)
  string(REPLACE "/usr/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/" text "${text}")
  string(REPLACE "/etc/default/hmpmd" "${CMAKE_INSTALL_FULL_SYSCONFDIR}/default/hmpmd" text
         "${text}")
  file(WRITE ${CMAKE_BINARY_DIR}/deploy/systemd/${unit} "${text}")
  install(FILES ${CMAKE_BINARY_DIR}/deploy/systemd/${unit} DESTINATION lib/systemd/system)
endforeach()
# The settings the units read; a conffile in the .deb, so upgrades keep edits.
install(FILES ${CMAKE_CURRENT_LIST_DIR}/systemd/hmpmd.default
        DESTINATION ${hmpmd_default_dir} RENAME hmpmd)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/systemd/device-0.json ${CMAKE_CURRENT_LIST_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "hmpmd")
set(CPACK_PACKAGE_VENDOR "HyperMPMD")
set(CPACK_PACKAGE_CONTACT "HyperMPMD maintainers <hmpmd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "HyperMPMD: single-controller MPMD orchestration (controller, worker, systemd units)")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
# The binaries are built with debug info (RelWithDebInfo); the package ships them stripped.
set(CPACK_STRIP_FILES ON)
# Runtime library dependencies (libzmq5, libspdlog, ...) come from dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_CURRENT_LIST_DIR}/debian/postinst;${CMAKE_CURRENT_LIST_DIR}/debian/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)
include(CPack)
