/* A shared object that exports no modattn_plugin_entry: must be refused. */
__attribute__((visibility("default"))) int not_a_modattn_plugin(void) { return 42; }
