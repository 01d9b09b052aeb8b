"""Build the benchmark guest from pinned Debian packages.

The package follows the build's concepts:

* :mod:`harness.guest.recipe`: ``images/recipe.toml`` and ``payload.lock``,
  parsed, path-checked and hashed;
* :mod:`harness.guest.packages`: fetching pinned ``.deb`` files into the shared
  cache, unpacking, repacking;
* :mod:`harness.guest.pin`: re-pinning (``apt-cache policy``, debootstrap's
  required set);
* :mod:`harness.guest.elf`: ELF sections, the dynamic loader, DT_NEEDED,
  ``vmlinux`` out of a bzImage, ``.modinfo`` and module load order;
* :mod:`harness.guest.cpio`: the initramfs archive format;
* :mod:`harness.guest.tree`: extracted packages seen with guest paths, and the
  files a guest needs out of them with every shared library they load;
* :mod:`harness.guest.initramfs`: the kernel's version and modules, and the
  initramfs assembled from them and the tools;
* :mod:`harness.guest.drives`: the payload and tools drives (ext2 images);
* :mod:`harness.guest.artifacts`: a finished build and its ``manifest.json``;
* :mod:`harness.guest.build`: the build's steps, and the builds kept in the
  cache by recipe hash;
* :mod:`harness.guest.logs`: where the build's progress goes (``logging``, or
  a caller's callback).

The names callers use are re-exported here (``from harness import guest;
guest.build_guest(...)``).
"""

from harness.guest.artifacts import MANIFEST_FORMAT, MANIFEST_NAME, GuestArtifacts
from harness.guest.build import KEEP_BUILDS, build_guest, prune_builds
from harness.guest.cpio import CpioEntry, CpioWriter, gzip_initramfs, read_cpio
from harness.guest.elf import (
    ElfError,
    ElfSection,
    elf_interpreter,
    elf_needed,
    elf_runpath,
    elf_section_data,
    elf_sections,
    module_depends,
    module_load_order,
    module_name,
    parse_modinfo,
    vmlinux_from_bzimage,
)
from harness.guest.logs import Log
from harness.guest.packages import (
    MAX_RECIPE_BYTES,
    PACKAGE_CACHE_BYTES,
    AptFile,
    deb_filename,
    extract_deb,
    fetch_debs,
    locate_debs,
    parse_print_uris,
    prune_package_cache,
    repack_uncompressed,
)
from harness.guest.pin import (
    parse_apt_policy,
    parse_depends,
    pin_recipe,
    required_closure,
    rewrite_recipe_pins,
)
from harness.guest.recipe import (
    BUILD_CODE_VERSION,
    MAX_RECIPE_PACKAGES,
    PIN_COMMAND,
    PayloadPackage,
    Recipe,
    RecipeError,
    check_guest_path,
    format_payload_lock,
    hash_files,
    load_recipe,
    parse_payload_lock,
    parse_recipe,
    read_recipe_file,
    recipe_files,
    recipe_hash,
)
from harness.guest.tree import LIBRARY_DIRS, Tree, collect_with_libraries

__all__ = [
    "BUILD_CODE_VERSION",
    "KEEP_BUILDS",
    "LIBRARY_DIRS",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "MAX_RECIPE_BYTES",
    "MAX_RECIPE_PACKAGES",
    "PACKAGE_CACHE_BYTES",
    "PIN_COMMAND",
    "AptFile",
    "CpioEntry",
    "CpioWriter",
    "ElfError",
    "ElfSection",
    "GuestArtifacts",
    "Log",
    "PayloadPackage",
    "Recipe",
    "RecipeError",
    "Tree",
    "build_guest",
    "check_guest_path",
    "collect_with_libraries",
    "deb_filename",
    "elf_interpreter",
    "elf_needed",
    "elf_runpath",
    "elf_section_data",
    "elf_sections",
    "extract_deb",
    "fetch_debs",
    "format_payload_lock",
    "gzip_initramfs",
    "hash_files",
    "load_recipe",
    "locate_debs",
    "module_depends",
    "module_load_order",
    "module_name",
    "parse_apt_policy",
    "parse_depends",
    "parse_modinfo",
    "parse_payload_lock",
    "parse_print_uris",
    "parse_recipe",
    "pin_recipe",
    "prune_builds",
    "prune_package_cache",
    "read_cpio",
    "read_recipe_file",
    "recipe_files",
    "recipe_hash",
    "repack_uncompressed",
    "required_closure",
    "rewrite_recipe_pins",
    "vmlinux_from_bzimage",
]
