"""The compiled part of reactor: optional, everything also runs as pure Python.

``reactor._recording._chainlink`` links the hash chain's signals with OpenSSL
(``reactor._recording.chain`` is the reference and the fallback). Where it cannot be
built (no compiler, no OpenSSL headers) the install goes on without it.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "reactor._recording._chainlink",
            ["reactor/_recording/_chainlink.c"],
            libraries=["crypto"],
            optional=True,
        )
    ]
)
