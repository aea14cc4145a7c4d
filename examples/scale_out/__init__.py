"""Scale-out on one machine: a service whose runs execute on `reactor worker` processes."""
