#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Generates configure and Makefile.in (they are not committed).
set -e
cd "$(dirname "$0")"
autoreconf --install --force
