"""Packaging glue: the folders service/, schema/ and migrations/ install as dra_mirror.*.

Everything else is in pyproject.toml; setuptools cannot derive mapped package names there.
"""

from setuptools import find_packages, setup

FOLDERS = ("service", "schema", "migrations")

setup(
    packages=[
        f"dra_mirror.{package}"
        for package in find_packages(include=[f"{folder}*" for folder in FOLDERS])
    ]
)
