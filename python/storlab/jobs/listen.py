"""The value of `--metrics-listen`: where a command serves its live figures. A port alone (or
`:PORT`) listens on loopback (127.0.0.1); any other address must be written out as an IP address
(`10.0.0.5:9100`, `[::]:9100`, `0.0.0.0:9100`), so the figures never leave the host unless the
user named where. `localhost` is loopback too; other host names are refused."""
from __future__ import annotations

import ipaddress

__all__ = ["parse_listen", "split_listen", "LOOPBACK"]

LOOPBACK = "127.0.0.1"
_FORMS = ("[ADDR:]PORT with PORT 0 to 65535 (0: any free port) and ADDR an IP address or localhost; "
          "PORT alone listens on loopback (127.0.0.1)")


def split_listen(value: str) -> tuple[str, int]:
    """(address, port) of a canonical value (`127.0.0.1:9100`, `[::1]:9100`)."""
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)


def parse_listen(raw: object, label: str) -> str:
    """The canonical `ADDR:PORT` (IPv6 in brackets) of what the user wrote; ValueError naming
    `label` and the allowed forms otherwise."""
    text = str(raw).strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    if not port.isdigit() or len(port) > 5 or int(port) > 65535:
        raise ValueError(f"{label}: {text!r} has no port; expected {_FORMS}")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host in ("", "localhost"):
        host = LOOPBACK
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{label}: {host!r} is not an IP address; expected {_FORMS} (a host name "
                          "could point beyond this host: write the address itself)") from None
    return f"[{address}]:{int(port)}" if address.version == 6 else f"{address}:{int(port)}"
