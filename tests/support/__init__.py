"""Test support: protocol servers, the A0 stand-in layout, and helpers shared by the tests."""
