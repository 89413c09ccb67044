package web

import "net/http"

// addPages registers the dashboard's pages (dashboard.go).
func (s *Server) addPages(mux *http.ServeMux) {}
