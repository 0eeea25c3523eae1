"""A pyarrow filesystem that behaves like an object store for GoFS's purposes: directories
cannot be moved (S3 has no such operation), and every move is recorded."""
from __future__ import annotations

import pyarrow.fs as pafs


class NoDirectoryMoves(pafs.FileSystemHandler):
    """The local disk, except that moving a directory raises and moves are logged in ``moves``."""

    def __init__(self):
        self.local = pafs.LocalFileSystem()
        self.moves: list[tuple[str, str]] = []

    def get_type_name(self):
        return "no-directory-moves"

    def normalize_path(self, path):
        return path

    def equals(self, other):
        return other is self

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.local.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("refusing to delete the root directory's contents")

    def delete_file(self, path):
        self.local.delete_file(path)

    def move(self, src, dest):
        if self.local.get_file_info(src).type == pafs.FileType.Directory:
            raise OSError(f"object store: cannot move directory {src}")
        self.moves.append((src, dest))
        self.local.move(src, dest)

    def copy_file(self, src, dest):
        self.local.copy_file(src, dest)

    def open_input_stream(self, path):
        return self.local.open_input_stream(path)

    def open_input_file(self, path):
        return self.local.open_input_file(path)

    def open_output_stream(self, path, metadata):
        return self.local.open_output_stream(path)

    def open_append_stream(self, path, metadata):
        raise OSError("object store: no appends")
