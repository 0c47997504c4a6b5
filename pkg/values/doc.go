// Package values merges, addresses and redacts plugin values.
//
// A plugin's effective values are built in layers, each deep-merged over the ones
// before it (mappings merge key by key; lists and scalars are replaced whole):
//
//  1. the defaults in plugin.yaml (spec.values.defaults);
//  2. the cluster's values for the plugin (spec.plugins.enabled[].values);
//  3. each valuesFrom entry, in the order listed (a YAML file, or one environment
//     variable set at a JSON pointer);
//  4. for a node pool, that pool's values (spec.plugins.enabled[].nodePools[].values),
//     which therefore inherit everything above.
//
// Values at sensitive JSON pointers are replaced by "***" by Redact; kubeplug redacts
// before it prints, logs, renders or stores values.
package values
