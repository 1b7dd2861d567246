// Command openapicheck fails when an OpenAPI (Swagger 2.0) document breaks
// a client written against an older one: make openapi-breaking compares
// the daemon's generated document with api/openapi.json, the committed
// document of the last release.
//
//	openapicheck OLD.json NEW.json
//
// A break is a route (path and method) removed, a parameter removed or
// moved, a parameter that became required or a new required one, a
// definition or a property of one removed, a property whose type, format,
// reference or item type changed, or a property that became required in
// a definition. Additions of routes, optional parameters and properties
// are compatible.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
)

type doc struct {
	Paths       map[string]map[string]operation `json:"paths"`
	Definitions map[string]schema               `json:"definitions"`
}

type operation struct {
	Parameters []parameter `json:"parameters"`
}

type parameter struct {
	Name     string  `json:"name"`
	In       string  `json:"in"`
	Required bool    `json:"required"`
	Type     string  `json:"type"`
	Format   string  `json:"format"`
	Schema   *schema `json:"schema"`
}

type schema struct {
	Ref        string            `json:"$ref"`
	Type       string            `json:"type"`
	Format     string            `json:"format"`
	Items      *schema           `json:"items"`
	Properties map[string]schema `json:"properties"`
	Required   []string          `json:"required"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: openapicheck OLD.json NEW.json")
		os.Exit(2)
	}
	old, err := load(os.Args[1])
	if err == nil {
		var cur doc
		if cur, err = load(os.Args[2]); err == nil {
			if breaks := compare(old, cur); len(breaks) > 0 {
				for _, b := range breaks {
					fmt.Println(b)
				}
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "openapicheck:", err)
	os.Exit(2)
}

func load(path string) (doc, error) {
	var d doc
	data, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: %w; it must be a Swagger 2.0 JSON document", path, err)
	}
	return d, nil
}

// compare lists every break of old by cur, sorted.
func compare(old, cur doc) []string {
	var out []string
	for path, ops := range old.Paths {
		for method, op := range ops {
			now, ok := cur.Paths[path][method]
			if !ok {
				out = append(out, fmt.Sprintf("route %s %s removed", method, path))
				continue
			}
			out = append(out, compareParams(method+" "+path, op.Parameters, now.Parameters)...)
		}
	}
	for name, s := range old.Definitions {
		now, ok := cur.Definitions[name]
		if !ok {
			out = append(out, fmt.Sprintf("definition %s removed", name))
			continue
		}
		out = append(out, compareSchema("definition "+name, s, now)...)
	}
	sort.Strings(out)
	return out
}

func compareParams(where string, old, cur []parameter) []string {
	var out []string
	find := func(ps []parameter, name string) *parameter {
		for i := range ps {
			if ps[i].Name == name {
				return &ps[i]
			}
		}
		return nil
	}
	for _, p := range old {
		n := find(cur, p.Name)
		switch {
		case n == nil:
			out = append(out, fmt.Sprintf("%s: parameter %s removed", where, p.Name))
		case n.In != p.In || n.Type != p.Type || n.Format != p.Format:
			out = append(out, fmt.Sprintf("%s: parameter %s changed from %s %s %s to %s %s %s", where, p.Name, p.In, p.Type, p.Format, n.In, n.Type, n.Format))
		case n.Required && !p.Required:
			out = append(out, fmt.Sprintf("%s: parameter %s became required", where, p.Name))
		case p.Schema != nil && n.Schema != nil:
			out = append(out, compareSchema(where+": parameter "+p.Name, *p.Schema, *n.Schema)...)
		}
	}
	for _, n := range cur {
		if n.Required && find(old, n.Name) == nil {
			out = append(out, fmt.Sprintf("%s: new required parameter %s", where, n.Name))
		}
	}
	return out
}

func compareSchema(where string, old, cur schema) []string {
	if old.Ref != cur.Ref || old.Type != cur.Type || old.Format != cur.Format {
		return []string{fmt.Sprintf("%s: changed from %s to %s", where, describe(old), describe(cur))}
	}
	var out []string
	if old.Items != nil && cur.Items != nil {
		out = append(out, compareSchema(where+" items", *old.Items, *cur.Items)...)
	} else if (old.Items == nil) != (cur.Items == nil) {
		out = append(out, fmt.Sprintf("%s: items changed", where))
	}
	for name, p := range old.Properties {
		n, ok := cur.Properties[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s: property %s removed", where, name))
			continue
		}
		out = append(out, compareSchema(where+"."+name, p, n)...)
	}
	for _, r := range cur.Required {
		if !slices.Contains(old.Required, r) {
			out = append(out, fmt.Sprintf("%s: property %s became required", where, r))
		}
	}
	return out
}

func describe(s schema) string {
	if s.Ref != "" {
		return s.Ref
	}
	if s.Format != "" {
		return s.Type + "/" + s.Format
	}
	if s.Type == "" {
		return "(untyped)"
	}
	return s.Type
}
