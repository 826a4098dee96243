//! Horizon with magnum-ui (and Skyline) in headless Chromium: see test-support/horizon.
