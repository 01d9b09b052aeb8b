"""Build the benchmark guest from pinned Debian packages.

The package follows the build's concepts:

* :mod:`harness.guest.recipe`: ``images/recipe.toml`` and ``payload.lock``,
  parsed, path-checked and hashed;
* :mod:`harness.guest.packages`: fetching pinned ``.deb`` files, unpacking,
  repacking, re-pinning (``apt-cache policy``, debootstrap's required set);
* :mod:`harness.guest.elf`: ELF sections, the dynamic loader, DT_NEEDED,
  ``vmlinux`` out of a bzImage, ``.modinfo`` and module load order;
* :mod:`harness.guest.cpio`: the initramfs archive format;
* :mod:`harness.guest.build`: the build itself and its artifacts.

The names callers use are re-exported here (``from harness import guest;
guest.build_guest(...)``).
"""

from harness.guest.build import (
    KEEP_BUILDS,
    LIBRARY_DIRS,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    GuestArtifacts,
    Tree,
    build_guest,
    collect_with_libraries,
    prune_builds,
)
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
from harness.guest.packages import (
    deb_filename,
    extract_deb,
    fetch_debs,
    parse_apt_policy,
    parse_depends,
    pin_recipe,
    repack_uncompressed,
    required_closure,
    rewrite_recipe_pins,
)
from harness.guest.recipe import (
    BUILD_CODE_VERSION,
    PIN_COMMAND,
    Log,
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

__all__ = [
    "BUILD_CODE_VERSION",
    "KEEP_BUILDS",
    "LIBRARY_DIRS",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "PIN_COMMAND",
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
    "module_depends",
    "module_load_order",
    "module_name",
    "parse_apt_policy",
    "parse_depends",
    "parse_modinfo",
    "parse_payload_lock",
    "parse_recipe",
    "pin_recipe",
    "prune_builds",
    "read_cpio",
    "read_recipe_file",
    "recipe_files",
    "recipe_hash",
    "repack_uncompressed",
    "required_closure",
    "rewrite_recipe_pins",
    "vmlinux_from_bzimage",
]
