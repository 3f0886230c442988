"""huggingface_hub's shared HTTP client, configured for the tool: our timeout on every
request, the minimum transfer rate (:func:`kernel_wheels.network.rate_guard`), one layer
of retries (ours), and the Hub's credentials only for the Hub's own origin.

HF_TOKEN goes only to ``HF_ENDPOINT``'s scheme, host and port: a request that a
pagination link, a redirect or a file URL sends elsewhere goes without it (and without
cookies). This is the only module that reaches into huggingface_hub's private
``utils._http`` and ``file_download`` (there is no public way to set either).
"""

from __future__ import annotations

from typing import Any

from ..network import NetworkSettings, origin, rate_guard


def configure(settings: NetworkSettings) -> None:
    """huggingface_hub's shared HTTP client has no timeout of its own: give it ours, so
    a Hub that accepts the connection and never answers cannot hang a run. Its calls
    pass timeouts of their own (10 s, 60 s when a HEAD is retried): a request hook
    replaces them with ours, so ``--timeout`` bounds every request."""
    from huggingface_hub.utils import _http

    def factory() -> object:
        from huggingface_hub import constants

        client = _http.default_client_factory()
        client.timeout = type(client.timeout)(settings.timeout)
        bound = client.timeout.as_dict()

        def our_timeout(request: Any) -> None:
            request.extensions["timeout"] = bound

        client.event_hooks["request"] += [our_timeout, credentials_only_for(constants.ENDPOINT)]
        client.event_hooks["response"].append(rate_guard(settings.timeout))
        return client

    _http.set_client_factory(factory)  # type: ignore[arg-type]
    _one_layer_of_retries()


def _one_layer_of_retries() -> None:
    """huggingface_hub retries on its own: API pages and file metadata five more times
    (waiting up to 23 s in all), a failed HEAD once more with a 60 s timeout, a broken
    download five more times. Our caller retries every call already (and a download
    resumes from what the HF cache kept), so its retries only multiply ours: a stalled
    Hub would take minutes per try. They are turned off, so that ``--retries`` and
    ``--timeout`` mean what they say."""
    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    for function, count in ((_http.http_backoff, "max_retries"),
                            (_http.http_stream_backoff, "max_retries"),
                            (file_download.http_get, "_nb_retries")):
        defaults = getattr(getattr(function, "__wrapped__", function), "__kwdefaults__", None)
        if defaults is not None and count in defaults:
            defaults[count] = 0
    for name in ("_DEFAULT_RETRY_ON_EXCEPTIONS", "_DEFAULT_RETRY_ON_STATUS_CODES"):
        if hasattr(file_download, name):  # the HEAD retried when no cached copy exists
            setattr(file_download, name, ())


def credentials_only_for(endpoint: str) -> Any:
    """An httpx request hook that removes the Authorization header (and cookies) from
    any request whose origin is not ``endpoint``'s: a token given for the Hub never
    reaches a host that a page, a redirect or a listing's next-page link names."""
    allowed = origin(endpoint)

    def strip_elsewhere(request: Any) -> None:
        if origin(str(request.url)) != allowed:
            for header in ("authorization", "cookie", "proxy-authorization"):
                if header in request.headers:
                    del request.headers[header]

    return strip_elsewhere


def headers() -> dict[str, str]:
    """The headers huggingface_hub sends the Hub (the user agent, HF_TOKEN's
    Authorization), for the requests made here rather than through its API."""
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    return dict(build_hf_headers())
