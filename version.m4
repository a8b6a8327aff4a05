dnl The one place where cuabi's versions live.
dnl Package version: MAJOR.MINOR.PATCH.
m4_define([cuabi_major], [0])
m4_define([cuabi_minor], [1])
m4_define([cuabi_patch], [0])
dnl libtool -version-info current:revision:age. Change per libtool's rules;
dnl the ABI version reported at run time is current - age (the soname major).
m4_define([cuabi_lt_current], [1])
m4_define([cuabi_lt_revision], [0])
m4_define([cuabi_lt_age], [0])
