"""PTX interpreter/JIT tests: a package, so its conftest does not clash with tests/server's."""
