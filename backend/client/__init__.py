"""Client-side helpers for callers of specwatch (standard library only, so a gateway can vendor them)."""
