/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx_device_list through the public API: 0 (no device on a host whose
 * kernel has no RDMA) or RMX_ENOTSUP (built without rdma-core), and inside
 * the SoftRoCE VM (tests/vm/rxe-vm sets RXE_VM_DEV) that device, with an
 * active Ethernet port and keys scoped by memory windows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rmx/rmx.h>

static void lists_what_the_host_has(void **state)
{
  rmx_device_info_t *list = NULL;
  int n = -1, rc = rmx_device_list(&list, &n);
  assert_true(rc == 0 || rc == RMX_ENOTSUP);
  if (rc) {
    assert_int_equal(n, 0);
    assert_null(list);
  }
  for (int i = 0; i < n; i++) {
    assert_int_equal(list[i].index, i);
    assert_true(list[i].name[0] != '\0');
    assert_in_range(list[i].nports, 0, RMX_DEV_MAX_PORTS);
  }
  rmx_device_list_free(list);
}

static void the_vm_has_rxe_with_an_active_ethernet_port(void **state)
{
  const char *want = getenv("RXE_VM_DEV");
  rmx_device_info_t *list = NULL, *d = NULL;
  int n = 0, up = 0;
  if (!want || !*want)
    skip(); /* not inside the VM */
  assert_int_equal(rmx_device_list(&list, &n), 0);
  for (int i = 0; i < n; i++)
    if (strcmp(list[i].name, want) == 0)
      d = &list[i];
  assert_non_null(d);
  assert_true(d->max_mr_size > 0);
  assert_int_equal(d->key_scope, 1); /* Linux 6.1's rxe binds type-2 windows */
  for (int p = 0; p < d->nports; p++)
    if (d->ports[p].active) {
      up = 1;
      assert_string_equal(d->ports[p].state, "active");
      assert_string_equal(d->ports[p].link_layer, "ethernet");
      assert_true(d->ports[p].mtu >= 256);
    }
  assert_true(up);
  rmx_device_list_free(list);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(lists_what_the_host_has),
    cmocka_unit_test(the_vm_has_rxe_with_an_active_ethernet_port),
  };
  return cmocka_run_group_tests_name("devices", tests, NULL, NULL);
}
