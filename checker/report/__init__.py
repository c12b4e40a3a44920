"""Reporters: one Verdict list in, text / JSON / SARIF / JUnit / HTML / DOT out."""
