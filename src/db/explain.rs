//! `Db::explain_get`: what a point lookup would consult and read.
