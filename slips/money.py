"""Amounts of money as the vault keeps them: integers in the currency's minor unit.

Owners think in whole units ("30 to 80 EUR"); agents and the Gatekeeper compare minor units
(3000 to 8000). The exponent between the two is the currency's (ISO 4217): most have 2, the
yen and a few others none, a few Gulf and North African dinars 3. Getting it wrong once made a
budget of 30 to 80 euros read as 0.30 to 0.80, so every conversion goes through here.
"""

from __future__ import annotations

# ISO 4217 currencies whose minor unit is not a hundredth. Every other code has exponent 2.
_EXPONENT_0 = frozenset(
    {
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI",
        "VND", "VUV", "XAF", "XOF", "XPF",
    }
)  # fmt: skip
_EXPONENT_3 = frozenset({"BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"})

# The currencies the vault form offers (the venue catalogues' currencies); the vault's schema
# accepts any three-letter code.
FORM_CURRENCIES: tuple[str, ...] = (
    "EUR", "USD", "GBP", "CHF", "CAD", "AUD", "JPY", "SEK", "NOK", "DKK",
)  # fmt: skip

# A budget band widens the range outward to multiples of this many whole units.
BAND_STEP_UNITS = 10


def currency_exponent(currency: str) -> int:
    """Digits after the decimal point in ``currency``'s minor unit (JPY 0, EUR 2, KWD 3)."""
    if currency in _EXPONENT_0:
        return 0
    if currency in _EXPONENT_3:
        return 3
    return 2


def minor_per_unit(currency: str) -> int:
    """How many minor units make one whole unit of ``currency`` (EUR 100, JPY 1)."""
    return 10 ** currency_exponent(currency)


def whole_units_to_minor(units: int, currency: str) -> int:
    """``units`` whole units of ``currency`` in minor units (30 EUR -> 3000)."""
    return units * minor_per_unit(currency)


def minor_in_words(amount: int, currency: str) -> str:
    """An amount in minor units as an owner reads it: "30" for 3000 EUR, "30.50" for 3050,
    "4200" for 4200 JPY (whole units carry no decimals)."""
    per_unit = minor_per_unit(currency)
    whole, rest = divmod(amount, per_unit)
    if rest == 0:
        return str(whole)
    return f"{whole}.{rest:0{currency_exponent(currency)}d}"


def budget_band(*, minimum: int, maximum: int, currency: str) -> tuple[int, int]:
    """The band around a budget range, in minor units: the minimum rounded down and the
    maximum rounded up to a step of ``BAND_STEP_UNITS`` whole units (43-57 EUR -> 40-60), so
    the band says "about" without the exact figures."""
    step = BAND_STEP_UNITS * minor_per_unit(currency)
    low = (minimum // step) * step
    high = -(-maximum // step) * step
    return low, high
