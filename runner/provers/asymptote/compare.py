"""Comparing a diagram with a reference, as the olympiad-diagram benchmark does without an LLM.

Two numbers, both fixed-precision strings (hashed results hold no floats):

keyword F1 -- over the *set* of Asymptote functions each source uses. A source's functions are the
    identifiers directly followed by `(` (spaces allowed) once comments and string literals are
    blanked, minus the language keywords (`if (`, `while (`, `return (` are not calls). A
    member call `a.length()` counts as `length`; a function the source defines counts like one it
    calls (both sides are tokenized alike). F1 = 2|A∩B| / (|A|+|B|); two empty sets give 1.
SSIM -- between the two renders the record keeps, each rasterized at one fixed size
    (RASTER_SIZE² pixels, 8-bit gray, scaled to fit and centred on white), computed by
    scikit-image with the settings of Wang et al. 2004 (Gaussian window σ=1.5, population
    covariance). A PDF is rasterized by ghostscript (RASTER_ARGS), a PNG here (png_raster); both
    sides are of one format, so one diagram gives one raster.
"""

from __future__ import annotations

import io
import re
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from runner.provers.asymptote import source as asy_source
from runner.provers.common.lexing import c_like_code

DIGITS = 4
RASTER_SIZE = 512
# gs renders a PDF page scaled into a fixed canvas: the same pixel grid for every diagram.
RASTER_ARGS = (
    "-q",
    "-dSAFER",
    "-dBATCH",
    "-dNOPAUSE",
    "-sDEVICE=pnggray",
    f"-g{RASTER_SIZE}x{RASTER_SIZE}",
    "-dFIXEDMEDIA",
    "-dPDFFitPage",
    "-dTextAlphaBits=4",
    "-dGraphicsAlphaBits=4",
)
# A PNG larger than this is not decoded for SSIM (a small file can claim a huge canvas).
MAX_PNG_PIXELS = 40_000_000
KEYWORDS = asy_source.KEYWORDS | {"operator"}  # asy's keywords: `if (`, `while (` are no calls
CALL = re.compile(r"(?<!\w)([A-Za-z_]\w*)\s*\(")


def functions_used(source: str) -> set[str]:
    return {name for name in CALL.findall(c_like_code(source)) if name not in KEYWORDS}


def keyword_f1(source: str, reference: str) -> str:
    mine, theirs = functions_used(source), functions_used(reference)
    if not mine and not theirs:
        return fixed(Fraction(1))
    return fixed(Fraction(2 * len(mine & theirs), len(mine) + len(theirs)))


def fixed(value: Fraction | float) -> str:
    """`value` as a string with DIGITS decimals, rounded half-even; never `-0.0000`."""
    exact = (
        Decimal(value.numerator) / Decimal(value.denominator)
        if isinstance(value, Fraction)
        else Decimal(value)
    )
    text = str(exact.quantize(Decimal(1).scaleb(-DIGITS), rounding=ROUND_HALF_EVEN))
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def png_raster(png: bytes) -> bytes:
    """`png` as RASTER_ARGS draws a page: gray, scaled to fit the square, centred on white.

    Raises ValueError for a PNG that does not decode or is too large to compare.
    """
    from PIL import Image  # heavy import, needed only when a reference is given

    try:
        with Image.open(io.BytesIO(png), formats=["PNG"]) as image:
            width, height = image.size
            if width * height > MAX_PNG_PIXELS:
                raise ValueError(f"the PNG is {width}x{height} pixels, too large to compare")
            image.load()
            flat = Image.new("RGBA", image.size, "white")
            flat.alpha_composite(image.convert("RGBA"))
    except (OSError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ValueError(f"the PNG does not decode: {exc}") from exc
    scale = RASTER_SIZE / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    gray = flat.convert("L").resize(size, Image.Resampling.LANCZOS)
    canvas = Image.new("L", (RASTER_SIZE, RASTER_SIZE), 255)
    canvas.paste(gray, ((RASTER_SIZE - size[0]) // 2, (RASTER_SIZE - size[1]) // 2))
    out = io.BytesIO()
    canvas.save(out, format="PNG")
    return out.getvalue()


def ssim(png: bytes, reference_png: bytes) -> str:
    """Structural similarity of two same-size grayscale PNGs (the rasters above)."""
    import numpy as np  # heavy imports, needed only when a reference is given
    from PIL import Image
    from skimage.metrics import structural_similarity

    images = [
        np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float64)
        for data in (png, reference_png)
    ]
    if images[0].shape != images[1].shape:
        raise ValueError(f"renders differ in size: {images[0].shape} vs {images[1].shape}")
    score = structural_similarity(
        images[0],
        images[1],
        data_range=255.0,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
    )
    return fixed(float(score))
