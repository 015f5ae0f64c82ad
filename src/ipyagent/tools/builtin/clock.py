"""`Clock`: the current date and time, and date arithmetic."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from ..activity import activity
from ..base_tool import BaseTool


class Clock(BaseTool):
    """Tells the current date and time, and counts days between dates."""

    @activity
    def now(self, timezone: str = "UTC") -> str:
        """The current date and time in ISO 8601, with the weekday.

        Args:
            timezone: an IANA time zone name such as "Europe/Paris" (default UTC).
        """
        moment = datetime.now(ZoneInfo(timezone))
        return f"{moment.isoformat(timespec='seconds')} ({moment:%A})"

    @activity
    def days_between(self, start: date, end: date) -> int:
        """The number of days from start to end (negative if end is earlier).

        Args:
            start: a date, YYYY-MM-DD.
            end: a date, YYYY-MM-DD.
        """
        return (end - start).days

    @activity
    def add_days(self, start: date, days: int) -> str:
        """The date a number of days after start (before, if negative).

        Args:
            start: a date, YYYY-MM-DD.
            days: how many days to add.
        """
        result = start + timedelta(days=days)
        return f"{result.isoformat()} ({result:%A})"
