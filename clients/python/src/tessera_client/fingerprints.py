"""Fingerprint probes and records: templates (ISO 19794-2, ANSI 378, NIST xyt)
or images (WSQ, PNG, TIFF, BMP, JPEG, raw), sent inline in the request (the
service extracts the minutiae of an image itself; there is no separate upload)."""

import os
from typing import Union

from . import pb

_fp = pb.fingerprint_pb2

IMAGE_EXTENSIONS = {
    ".png": _fp.IMAGE_FORMAT_PNG, ".tif": _fp.IMAGE_FORMAT_TIFF, ".tiff": _fp.IMAGE_FORMAT_TIFF,
    ".bmp": _fp.IMAGE_FORMAT_BMP, ".jpg": _fp.IMAGE_FORMAT_JPEG, ".jpeg": _fp.IMAGE_FORMAT_JPEG,
    ".wsq": _fp.IMAGE_FORMAT_WSQ, ".raw": _fp.IMAGE_FORMAT_RAW,
}
TEMPLATE_EXTENSIONS = {
    ".iso": _fp.TEMPLATE_FORMAT_ISO19794, ".ist": _fp.TEMPLATE_FORMAT_ISO19794,
    ".ansi": _fp.TEMPLATE_FORMAT_ANSI378, ".378": _fp.TEMPLATE_FORMAT_ANSI378,
    ".xyt": _fp.TEMPLATE_FORMAT_XYT,
}

Source = Union[bytes, str, os.PathLike]


def _bytes_of(source: Source) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    with open(source, "rb") as f:
        return f.read()


def fingerprint_image(source: Source, *, ppi: float = 0, format: int = _fp.IMAGE_FORMAT_AUTO, width: int = 0,
                      height: int = 0, min_quality: int = 0) -> "pb.fingerprint_pb2.FingerprintTemplate":
    """A probe/record from an image file or its bytes (format detected from the
    bytes unless given; raw gray needs width and height; ppi 0: the file's)."""
    if format == _fp.IMAGE_FORMAT_AUTO and isinstance(source, (str, os.PathLike)):
        format = IMAGE_EXTENSIONS.get(os.path.splitext(os.fspath(source))[1].lower(), _fp.IMAGE_FORMAT_AUTO)
    image = _fp.FingerprintImage(data=_bytes_of(source), format=format, ppi=ppi, width=width, height=height,
                                 min_quality=min_quality)
    return _fp.FingerprintTemplate(image=image)


def fingerprint_template(source: Source, *, format: int = _fp.TEMPLATE_FORMAT_AUTO,
                         view: int = 0) -> "pb.fingerprint_pb2.FingerprintTemplate":
    """A probe/record from a minutiae template file or its bytes (format detected unless given)."""
    if format == _fp.TEMPLATE_FORMAT_AUTO and isinstance(source, (str, os.PathLike)):
        format = TEMPLATE_EXTENSIONS.get(os.path.splitext(os.fspath(source))[1].lower(), _fp.TEMPLATE_FORMAT_AUTO)
    return _fp.FingerprintTemplate(data=_bytes_of(source), format=format, view=view)


def as_template(value, *, image: bool = False) -> "pb.fingerprint_pb2.FingerprintTemplate":
    """A FingerprintTemplate from what callers pass: a FingerprintTemplate or
    FingerprintImage as is; a path by its extension (image extensions are
    images, anything else a template); bytes as a template (or, with
    image=True, an image)."""
    if isinstance(value, _fp.FingerprintTemplate):
        return value
    if isinstance(value, _fp.FingerprintImage):
        return _fp.FingerprintTemplate(image=value)
    if isinstance(value, (str, os.PathLike)):
        if image or os.path.splitext(os.fspath(value))[1].lower() in IMAGE_EXTENSIONS:
            return fingerprint_image(value)
        return fingerprint_template(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return fingerprint_image(value) if image else fingerprint_template(value)
    raise TypeError(f"expected a FingerprintTemplate, FingerprintImage, path or bytes, got {type(value).__name__}")
