import { operationId } from './operation-ids';

describe('operationId', () => {
  it('reads a verb from the method and the resource from the controller, plural after list', () => {
    expect(operationId('ItemsController', 'create')).toBe('createItem');
    expect(operationId('ItemsController', 'list')).toBe('listItems');
    expect(operationId('ItemsController', 'patchMetadata')).toBe('patchItemMetadata');
    expect(operationId('EdgesController', 'listForItem')).toBe('listEdgesForItem');
    expect(operationId('WebhooksController', 'rotateSecret')).toBe('rotateWebhookSecret');
  });

  it('reads remove as delete, and takes the resource a controller is named for otherwise', () => {
    expect(operationId('UsersController', 'remove')).toBe('deleteUser');
    expect(operationId('BulkController', 'get')).toBe('getBulkJob');
    expect(operationId('AuditController', 'list')).toBe('listAuditEvents');
  });

  it('takes the ids given where the rule reads badly, and refuses to guess one for a handler of several paths', () => {
    expect(operationId('AccountController', 'remove')).toBe('revokeGrant');
    expect(operationId('UserinfoController', 'get[1]')).toBe('getOAuth2Userinfo');
    expect(() => operationId('ItemsController', 'get[0]')).toThrow(/several paths/);
  });
});
