"""Proton-Python's containers without their eager TLS set-up.

Proton-Python 0.37 makes a client and a server SSL domain for every Container (and so for
every BlockingConnection) when it is made, and hands the client domain to every connect.
Making one costs about 80 ms of CPU (OpenSSL reads the system's CA store), which made the TLS
set-up of containers that never use TLS most of the CPU the system tests' own processes spent.
Importing this module (conftest.py does, in every pytest process) makes both domains when first
used instead: by a TLS connect or listen, or a test that configures them.  A connection given
its own ssl_domain, as the TLS tests' are, is not affected."""

import proton._reactor as _reactor


class LazySSLDomain:
    """An SSLDomain made on its first use (any attribute asked of it)."""

    def __init__(self, mode):
        self._lazy_mode = mode
        self._lazy_domain = None

    def __bool__(self):
        return True

    def __getattr__(self, name):
        if self._lazy_domain is None:
            self._lazy_domain = _reactor.SSLDomain(self._lazy_mode)
        return getattr(self._lazy_domain, name)


class LazySSLConfig(_reactor.SSLConfig):
    def __init__(self):  # noqa: D107 - no domain made yet (the base class makes both)
        self.client = LazySSLDomain(_reactor.SSLDomain.MODE_CLIENT)
        self.server = LazySSLDomain(_reactor.SSLDomain.MODE_SERVER)


_reactor.SSLConfig = LazySSLConfig
