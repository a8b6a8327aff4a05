/* Given to every source of the manifest as an in-memory header ([[header]]). */
#pragma once
#define EXAMPLE_BLOCK 256
